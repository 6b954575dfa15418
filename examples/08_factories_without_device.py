"""Tensors created with factories and no device, combined with a moved model's output.

`torch.randn` / `torch.zeros` make CPU tensors; adding them to the GPU output fails
with "Expected all tensors to be on the same device". devmod adds `device=device` to
each factory and folds `torch.randn(...).to(device)` into `device=` (DM201).
"""
# expect-before: device-error
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

projection = nn.Linear(20, 5)
projection.to(device)

x = torch.randn(10, 20).to(device)
w = torch.randn(20, 5)
b = torch.zeros(5)
y = torch.matmul(x, w) + b + projection(x)
print("y", tuple(y.shape), "on", y.device)
