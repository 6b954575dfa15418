"""A CPU-only script whose test code lives in a function inside the main block.

When devmod moves the model, everything that meets it moves too, and nothing else:
- the inputs are normalised with their own statistics after a legacy `torch.Tensor(...)`:
  they move after the last normalising step;
- `predict()` is defined inside the main block, so it is driver code: the inputs it builds
  with a helper and its hidden state move with the model it calls;
- the spiral angles are read by `math.sin` one element at a time, the radii meet a legacy
  CPU tensor and the plot box goes to NumPy: all three stay on the CPU, where they work.
"""
# expect-before: cpu-only
import math

import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)
steps = 12


def probe_rows(count):
    return torch.FloatTensor([[0.1 * k, 0.2 * k] for k in range(count)])


class Tracker(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.GRU(2, 8, batch_first=True)
        self.head = nn.Linear(8, 1)

    def forward(self, x, hidden):
        out, hidden = self.cell(x, hidden)
        return self.head(out), hidden


if __name__ == "__main__":
    angles = torch.linspace(0, math.pi, steps)
    radii = torch.linspace(0.5, 1.0, steps)
    points = [radii[k] * torch.FloatTensor((math.cos(angles[k]), math.sin(angles[k]))) for k in range(steps)]
    box = np.asarray(torch.tensor((-1.0, 1.0, -1.0, 1.0)) * 1.5)

    inputs = torch.Tensor([p.tolist() for p in points])
    inputs = (inputs - inputs.mean(0)) / inputs.std(0)
    targets = torch.Tensor([[p.norm().item()] for p in points])

    model = Tracker()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    for epoch in range(3):
        hidden = torch.zeros(1, 1, 8)
        guess, _ = model(inputs.unsqueeze(0), hidden)
        loss = nn.functional.mse_loss(guess.squeeze(0), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    def predict(count):
        rows = probe_rows(count)
        start = torch.zeros(1, 1, 8)
        out, _ = model(rows.unsqueeze(0), start)
        return out.squeeze().tolist()

    print(f"loss {loss.item():.3f}", predict(3), box.tolist())
