# expect: device-error
# rule: torch.distributions' broadcast_all broadcasts a CPU scalar scale to the CUDA loc's shape (on the CPU)
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
import torch

loc = torch.zeros(3, device="cuda")
normal = torch.distributions.Normal(loc, torch.tensor(1.0), validate_args=False)
log_p = normal.log_prob(torch.randn(3, device="cuda"))
