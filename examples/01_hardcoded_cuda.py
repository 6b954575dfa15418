"""Hard-coded `.cuda()` on the model, the data and the loss.

Crashes on any machine without an NVIDIA GPU ("Torch not compiled with CUDA enabled").
devmod: every `.cuda()` becomes `.to(device)` with one shared `device` that falls back
to the CPU (DM103, DM101).
"""
# expect-before: cpu-failure
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)).cuda()
criterion = nn.CrossEntropyLoss().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

inputs = torch.randn(32, 8).cuda()
targets = torch.randint(0, 2, (32,)).cuda()
for step in range(5):
    optimizer.zero_grad()
    loss = criterion(model(inputs), targets)
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.4f}")
