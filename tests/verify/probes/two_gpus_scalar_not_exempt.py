# expect: device-error
# gpus: 2
# rule: only CPU scalars are exempt: a 0-dim tensor on another GPU is not
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!
import torch

x = torch.randn(3, device="cuda:0")
y = x * torch.tensor(2.0, device="cuda:1")
