# expect: device-error
# rule: a CPU factory given a CUDA generator fails the same check the other way round
# message: Expected a 'cpu' device type for generator but found 'cuda'
import torch

generator = torch.Generator(device="cuda").manual_seed(0)
order = torch.randperm(8, generator=generator)
