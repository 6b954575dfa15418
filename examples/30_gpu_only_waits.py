"""A benchmark loop that times a model with `torch.cuda.synchronize()`.

The script already picks its device with a CPU fallback, but `synchronize()` (and
`reset_peak_memory_stats()`) fail on a machine without CUDA: "Torch not compiled with
CUDA enabled". devmod runs them only where a GPU is available (DM104); on a GPU the
timing is what it was.
"""
# expect-before: cpu-failure
import time

import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
mlp = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).to(device)
inputs = torch.randn(16, 32, device=device)


def time_forward(model, batch, repeats=5):
    torch.cuda.synchronize()  # work queued earlier must not count
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(repeats):
        model(batch)
    torch.cuda.synchronize()  # the kernels run asynchronously: wait before reading the clock
    return (time.perf_counter() - start) / repeats


print(f"{time_forward(mlp, inputs) * 1e3:.3f} ms per forward pass")
