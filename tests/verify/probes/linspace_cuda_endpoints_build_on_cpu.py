# expect: device-error
# rule: linspace with 0-dim CUDA endpoints reads them as numbers and builds on the default device (the CPU), so concatenating the ramp to a CUDA tensor fails (latent_ode's linspace_vector)
# message: Expected all tensors to be on the same device, but got tensors is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_cat)
import torch

edge = torch.zeros(3, device="cuda")
ramp = torch.linspace(edge[0], edge[1] + 1, 4)
joined = torch.cat((edge, ramp))
