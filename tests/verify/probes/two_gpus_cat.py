# expect: device-error
# gpus: 2
# rule: the generated check names a cuda:1 tensor among cuda:0 ones
# message: Expected all tensors to be on the same device, but got tensors is on cuda:1, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_cat)
import torch

y = torch.cat([torch.randn(2, device="cuda:0"), torch.randn(2, device="cuda:1")])
