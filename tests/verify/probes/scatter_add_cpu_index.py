# expect: device-error
# rule: scatter_add's generated check: index on self's device (no exemption)
# message: Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_scatter_add)
import torch

counts = torch.zeros(4, device="cuda")
counts = counts.scatter_add(0, torch.tensor([1, 1, 3]), torch.ones(3, device="cuda"))
