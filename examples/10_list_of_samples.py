"""Iterating a plain Python list of sample tensors through a moved model.

The samples are CPU tensors; the model is on the GPU. devmod moves each sample at the
top of the loop (DM203) and keeps the list itself on the CPU (no `device=` there).
"""
# expect-before: device-error
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

samples = [torch.randn(1, 10) for _ in range(50)]
model = nn.Linear(10, 2)
model.to(device)

outputs = []
for sample in samples:
    outputs.append(model(sample))
print("processed", len(outputs), "samples")
