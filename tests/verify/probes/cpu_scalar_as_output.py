# expect: device-error
# rule: the exemption never covers an output: cpu_scalar += cuda_tensor writes into the CPU tensor
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
import torch

total = torch.tensor(0.0)
loss = torch.randn(4, device="cuda").sum()
total += loss
