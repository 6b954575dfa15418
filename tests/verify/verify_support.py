"""Helpers shared by the tests of `devmod verify` (imported as a plain module)."""

from __future__ import annotations

import os
import pathlib
import textwrap

import pytest

torch = pytest.importorskip("torch")

from codemods.verify.simulate import simulated_cuda  # noqa: E402

MISMATCH = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"

# A correctly placed training loop: DataLoader with pinned memory, Adam, a scheduler,
# gradient clipping, a checkpoint saved and loaded with map_location. BUG_LINE marks the
# line that, without `.to(device)`, is the classic "batch not moved" bug.
TRAIN = '''\
import sys
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 6), torch.randint(0, 3, (64,)))
loader = DataLoader(data, batch_size=16, shuffle=True, pin_memory=True)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 1.0])).to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
for epoch in range(2):
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)  # BUG_LINE
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
    scheduler.step()
checkpoint = sys.argv[1] if len(sys.argv) > 1 else "checkpoint.pt"
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, checkpoint)
state = torch.load(checkpoint, map_location=device)
model.load_state_dict(state["model"])
optimizer.load_state_dict(state["optimizer"])
loss = criterion(model(x), y)
loss.backward()
optimizer.step()
print(f"loss {loss.item():.4f} on {next(model.parameters()).device}")
'''
BUG_LINE = TRAIN.splitlines().index(next(l for l in TRAIN.splitlines() if "BUG_LINE" in l)) + 1
BUGGY_TRAIN = TRAIN.replace(
    "        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)  # BUG_LINE\n",
    "        pass  # the batch is never moved\n")
# In the buggy loop the first use of the batch is the forward pass two lines further down.
BUGGY_LINE = BUG_LINE + 2


def write(folder: pathlib.Path, body: str, name: str = "train.py") -> pathlib.Path:
    path = folder / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


# DEVMOD_VERIFY_REAL_GPU=1 on a machine with a GPU runs the tests that use `sim` against real
# CUDA instead: the same assertions must hold there (how the simulation's rules were checked).
REAL_GPU = os.environ.get("DEVMOD_VERIFY_REAL_GPU") == "1" and torch.cuda.is_available()


@pytest.fixture
def sim():
    if REAL_GPU:
        yield None
        return
    with simulated_cuda() as mode:
        yield mode
