# expect: device-error
# rule: the exemption is for 0-dim tensors only; a 1-element 1-D CPU tensor is not a scalar
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
import torch

x = torch.randn(3, device="cuda")
y = x + torch.tensor([1.0])
