# expect: device-error
# rule: a CUDA factory given a CPU torch.Generator fails ATen's check_generator
# message: Expected a 'cuda' device type for generator but found 'cpu'
import torch

generator = torch.Generator().manual_seed(0)
noise = torch.randn(4, device="cuda", generator=generator)
