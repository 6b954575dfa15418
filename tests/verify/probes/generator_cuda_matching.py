# expect: ok
# rule: a CUDA generator with a CUDA factory (and in-place sampling of a CUDA tensor) works
import torch

generator = torch.Generator(device="cuda")
generator.manual_seed(0)
assert generator.device.type == "cuda"
noise = torch.randn(4, device="cuda", generator=generator)
noise.uniform_(0, 1, generator=generator)
assert noise.device.type == "cuda"
