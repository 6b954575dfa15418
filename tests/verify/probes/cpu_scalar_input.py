# expect: ok
# rule: a 0-dim CPU tensor may be an input of a TensorIterator op with CUDA tensors (a CPU scalar)
import torch

x = torch.randn(3, device="cuda")
scale = torch.tensor(2.0)
y = x * scale + torch.tensor(1.0)
y = torch.where(y > 0, y, torch.tensor(0.0))
x.mul_(scale)
assert y.device.type == "cuda" and x.device.type == "cuda"
