# expect: device-error
# rule: index_put with a value tensor: the values must be on the indexed tensor's device
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
import torch

x = torch.zeros(5, device="cuda")
index = torch.tensor([0, 2], device="cuda")
x[index] = torch.tensor([1.0, 2.0])
