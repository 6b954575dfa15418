# expect: device-error
# rule: expand() turns a CPU scalar into a rank-1 CPU tensor, which loses the exemption
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
import torch

x = torch.randn(3, device="cuda")
bias = torch.tensor(0.5).expand(3)
y = x + bias
