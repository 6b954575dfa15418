# expect: device-error
# rule: after broadcast_tensors the CPU scalar is a rank-1 CPU tensor: the next op with CUDA fails
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
import torch

x = torch.randn(3, device="cuda")
a, b = torch.broadcast_tensors(x, torch.tensor(1.0))
y = a * b
