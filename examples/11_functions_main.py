"""Everything inside `main()`; `train(model, loader, optimizer)` and
`evaluate(model, loader)` receive what they use as parameters.

`main()` moves the model, but the loops in `train` and `evaluate` never move their
batches: "Expected all tensors to be on the same device" on a GPU. devmod moves each
batch in both loops, using one module-level device that replaces main's own (DM203,
DM101).
"""
# expect-before: device-error
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


def make_loader(n, shuffle):
    data = TensorDataset(torch.randn(n, 6), torch.randint(0, 2, (n,)))
    return DataLoader(data, batch_size=8, shuffle=shuffle)


def train(model, loader, optimizer):
    model.train()
    for inputs, targets in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
    return loss.item()


def evaluate(model, loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for inputs, targets in loader:
            correct += (model(inputs).argmax(dim=1) == targets).sum().item()
    return correct / len(loader.dataset)


def main():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 2)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    train_loader, test_loader = make_loader(64, True), make_loader(32, False)
    for epoch in range(2):
        loss = train(model, train_loader, optimizer)
        print(f"epoch {epoch}: loss {loss:.3f} accuracy {evaluate(model, test_loader):.2f}")


if __name__ == "__main__":
    if torch.cuda.is_available():
        print("GPU available:", torch.cuda.get_device_name(0))
    main()
