# expect: device-error
# gpus: 2
# rule: cuda:1 vs cuda:0 mismatch like cpu vs cuda (the first non-CPU device is the common one)
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cuda:0!
import torch

a = torch.randn(3, device="cuda:1")
b = torch.randn(3, device="cuda:0")
c = a + b
