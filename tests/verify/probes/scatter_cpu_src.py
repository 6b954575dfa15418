# expect: device-error
# rule: scatter_'s generated check: index and src on self's device
# message: Expected all tensors to be on the same device, but got src is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_scatter__src)
import torch

target = torch.zeros(2, 3, device="cuda")
index = torch.tensor([[0, 1, 2]], device="cuda")
target.scatter_(0, index, torch.ones(1, 3))
