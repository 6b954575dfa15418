# expect: device-error
# rule: stack reaches cat, whose check has no CPU-scalar exemption, even for 0-dim inputs
# message: Expected all tensors to be on the same device, but got tensors is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_cat)
import torch

losses = torch.stack([torch.tensor(1.0, device="cuda"), torch.tensor(2.0)])
