"""Dict batches from a custom collate function.

The collate function builds `{"x": ..., "y": ...}` on the CPU (correct: it runs in the
DataLoader). The loop feeds the dict straight to a model on the GPU. devmod moves every
value of the dict at the top of the loop (DM203) and leaves the collate function alone.
"""
# expect-before: device-error
import torch
import torch.nn as nn
from torch.utils.data import DataLoader


def collate(pairs):
    xs = torch.stack([torch.tensor(p[0], dtype=torch.float32) for p in pairs])
    ys = torch.tensor([p[1] for p in pairs])
    return {"x": xs, "y": ys}


def run():
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = [([float(i), float(i % 3)], i % 2) for i in range(40)]
    loader = DataLoader(rows, batch_size=10, collate_fn=collate)
    model = nn.Linear(2, 2).to(device)
    loss_fn = nn.CrossEntropyLoss()
    for batch in loader:
        loss = loss_fn(model(batch["x"]), batch["y"])
        loss.backward()
    print(f"loss {loss.item():.4f}")


if __name__ == "__main__":
    run()
