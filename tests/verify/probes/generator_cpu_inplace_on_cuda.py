# expect: device-error
# rule: in-place sampling of a CUDA tensor with a CPU generator fails the generator check
# message: Expected a 'cuda' device type for generator but found 'cpu'
import torch

weights = torch.empty(3, device="cuda")
weights.normal_(0.0, 1.0, generator=torch.Generator())
