"""A small point-cloud tagger written on the CPU, with three shapes that real repositories taught.

- `tagger(pretrained)` is the file's public factory: it builds the model, maybe loads weights,
  and returns it without running it. That is construction, even though the main block calls
  it: devmod moves the model where the factory is called, so a caller that keeps it on the CPU
  keeps working.
- The main block feeds the model an item of a Dataset (`cloud, parts = clouds[3]`), reshaped
  first: that item moves with the model, where it is last bound before the model reads it.
- The model drops random layers while training with a mask read only as Python booleans
  (`if not drop`): the mask stays on the CPU, where reading it costs nothing (on a GPU every
  read would wait for the device).
"""
# expect-before: cpu-only
import torch
import torch.nn as nn
from torch.utils.data import Dataset

torch.manual_seed(0)


class Clouds(Dataset):
    def __init__(self, count=8, points=32):
        self.points = torch.rand(count, points, 3)
        self.parts = torch.randint(0, 4, (count, points))

    def __len__(self):
        return len(self.points)

    def __getitem__(self, i):
        return self.points[i], self.parts[i]


class Tagger(nn.Module):
    def __init__(self, width=16, depth=3, drop=0.3):
        super().__init__()
        self.stem = nn.Conv1d(3, width, 1)
        self.blocks = nn.ModuleList([nn.Conv1d(width, width, 1) for _ in range(depth)])
        self.head = nn.Conv1d(width, 4, 1)
        self.drop = drop

    def forward(self, x):
        h = torch.relu(self.stem(x))
        skip = torch.rand(len(self.blocks)) < self.drop
        for block, drop in zip(self.blocks, skip):
            if self.training and drop:
                continue
            h = h + torch.relu(block(h))
        return self.head(h)


def tagger(pretrained=False):
    model = Tagger()
    if pretrained:
        model.load_state_dict(Tagger().state_dict())
    return model


if __name__ == "__main__":
    clouds = Clouds()
    net = tagger(pretrained=True)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    for step in range(3):
        cloud, parts = clouds[step]
        cloud = cloud.t().unsqueeze(0)
        loss = nn.functional.cross_entropy(net(cloud), parts.unsqueeze(0))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(step, round(loss.item(), 4))
