# expect: device-error
# rule: cat has its own (generated) device check: every tensor on the first one's device
# message: Expected all tensors to be on the same device, but got tensors is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_cat)
import torch

y = torch.cat([torch.randn(2, device="cuda"), torch.randn(2)])
