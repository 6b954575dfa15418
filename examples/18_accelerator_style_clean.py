"""Already device-correct, in the style of today's pytorch/examples: the device comes
from `torch.accelerator` with a CPU fallback.

devmod must leave this file byte-identical.
"""
# expect-before: clean
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    torch.manual_seed(0)
    if torch.accelerator.is_available():
        device = torch.accelerator.current_accelerator()
    else:
        device = torch.device("cpu")
    loader = DataLoader(TensorDataset(torch.randn(40, 3), torch.randn(40, 1)), batch_size=10)
    model = nn.Linear(3, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for data, target in loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(data), target)
        loss.backward()
        optimizer.step()
    print(f"device {device.type}, loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
