"""The model is moved to the GPU but the input tensor is created on the CPU.

On a GPU: "Expected all tensors to be on the same device" inside the Linear layer.
devmod: the input is created on the device (DM201).
"""
# expect-before: device-error
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

model = nn.Linear(10, 2)
model.to(device)

input_tensor = torch.randn(1, 10)
output = model(input_tensor)
print("forward pass done:", tuple(output.shape))
