"""Devices written as strings: `device="cuda:0"`, `.to("cuda:0")`, and a device
variable hard-coded to `"cuda"` and compared with `== "cuda"`.

Fails on a CPU-only machine, and once the string becomes a `torch.device` the
comparison silently turns False (`torch.device("cuda") == "cuda"` is False).
devmod: the strings become the shared `torch.device` and the comparison becomes
`device.type == "cuda"` (DM102).
"""
# expect-before: cpu-failure
import torch
import torch.nn as nn

torch.manual_seed(0)
device = "cuda"
if device == "cuda":
    torch.backends.cudnn.benchmark = True

layer = nn.Linear(4, 3).to("cuda:0")
scale = torch.full((3,), 0.5, device="cuda:0")
batch = torch.randn(6, 4).to("cuda")
out = layer(batch) * scale
print("output", tuple(out.shape), "on", out.device)
