# expect: device-error
# rule: nn.Linear reaches addmm, whose generated check names the CPU batch mat1
# message: Expected all tensors to be on the same device, but got mat1 is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)
import torch

model = torch.nn.Linear(3, 2).cuda()
out = model(torch.randn(4, 3))
