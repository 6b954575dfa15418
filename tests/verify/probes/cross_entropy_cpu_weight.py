# expect: device-error
# rule: cross_entropy reaches nll_loss_forward, whose generated check names the CPU class weight
# message: Expected all tensors to be on the same device, but got weight is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_nll_loss_forward)
import torch

criterion = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 1.0]))
loss = criterion(torch.randn(4, 3, device="cuda"), torch.tensor([0, 1, 2, 0], device="cuda"))
