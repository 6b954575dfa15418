"""A loss built with a class-weight tensor on the CPU.

`weight=` becomes a buffer of the loss module; with logits on the GPU the loss fails
with "Expected all tensors to be on the same device". devmod creates the weights on
the device (DM201).
"""
# expect-before: device-error
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

class_weights = torch.tensor([1.0, 3.0, 0.5])
criterion = nn.CrossEntropyLoss(weight=class_weights)
classifier = nn.Linear(6, 3).to(device)

logits = classifier(torch.randn(9, 6, device=device))
targets = torch.randint(0, 3, (9,), device=device)
print(f"weighted loss {criterion(logits, targets).item():.4f}")
