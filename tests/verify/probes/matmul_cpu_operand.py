# expect: device-error
# rule: 2-D @ 2-D reaches mm, whose generated check names mat2
# message: Expected all tensors to be on the same device, but got mat2 is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_mm)
import torch

y = torch.randn(4, 3, device="cuda") @ torch.randn(3, 2)
