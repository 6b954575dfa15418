"""Library-shaped code: helpers that run at construction time or inside forward.

The global device belongs to driver code (the `__main__` block and what only it calls).
- `ramp(n)` builds a buffer for `__init__`: nothing is placed there, `model.to()` moves it;
- `Block(dim)` returns layers: construction code, no `.to()`;
- `keep_mask(t, p)` receives a tensor: it follows `t.device`;
- `column_means(loader)` summarises data on the CPU and its caller calls `.numpy()`;
- inside `forward`, a tensor moved to the module's global device follows the input
  instead, and a legacy `torch.LongTensor` built there follows it too.
devmod gives the shared device to the main block only.
"""
# expect-before: device-error
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def ramp(n):
    return torch.arange(n) / n


def Block(dim):
    return nn.Sequential(nn.Linear(dim, dim), nn.ReLU())


def keep_mask(t, p):
    return torch.zeros(t.shape[0]).uniform_(0, 1) < p


def column_means(loader):
    total = torch.zeros(4)
    count = 0
    for x, _ in loader:
        total += x.sum(0)
        count += x.shape[0]
    return total / count


class Denoiser(nn.Module):
    def __init__(self, dim=4):
        super().__init__()
        self.block = Block(dim)
        self.register_buffer("scale", ramp(dim))

    def forward(self, x):
        offset = torch.ones(x.shape[-1]).to(device)
        picks = torch.LongTensor([0, 1])
        keep = keep_mask(x, 0.5).float()
        return (self.block(x * self.scale) + offset)[:, picks] * keep[:, None]


if __name__ == "__main__":
    data = TensorDataset(torch.randn(8, 4), torch.zeros(8))
    loader = DataLoader(data, batch_size=4)
    print(column_means(loader).numpy().round(2).shape)
    model = Denoiser().to(device)
    for x, _ in loader:
        print(model(x).shape)
