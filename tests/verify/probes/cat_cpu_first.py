# expect: device-error
# rule: cat names the first tensor that differs from the first tensor's device
# message: Expected all tensors to be on the same device, but got tensors is on cuda:0, different from other tensors on cpu (when checking argument in method wrapper_CUDA_cat)
import torch

y = torch.cat([torch.randn(2), torch.randn(2, device="cuda")])
