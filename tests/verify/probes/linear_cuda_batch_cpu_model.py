# expect: device-error
# rule: the addmm check starts from the bias (self): a CUDA batch into a CPU layer names mat1 on cuda:0
# message: Expected all tensors to be on the same device, but got mat1 is on cuda:0, different from other tensors on cpu (when checking argument in method wrapper_CUDA_addmm)
import torch

model = torch.nn.Linear(3, 2)
out = model(torch.randn(4, 3, device="cuda"))
