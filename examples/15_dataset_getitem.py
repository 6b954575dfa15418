"""A Dataset that builds tensors in `__getitem__`, and a loop that never moves them.

The tensors made in `__getitem__` must stay on the CPU (CUDA in forked DataLoader
workers fails, pinned memory needs CPU tensors): devmod leaves the Dataset alone and
moves the batch in the training loop instead (DM203).
"""
# expect-before: device-error
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class SquaresDataset(Dataset):
    def __len__(self):
        return 48

    def __getitem__(self, index):
        x = torch.tensor([index / 48.0])
        y = torch.tensor([(index / 48.0) ** 2])
        return x, y


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(SquaresDataset(), batch_size=12, shuffle=True, pin_memory=True)
    model = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(3):
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
