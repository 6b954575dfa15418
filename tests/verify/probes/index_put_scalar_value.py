# expect: ok
# rule: a 0-dim CPU value for an index_put into a CUDA tensor is read as a scalar
import torch

x = torch.zeros(5, device="cuda")
x[x == 0] = torch.tensor(1.0)
x[torch.tensor([0, 1])] = 3.0
assert x.device.type == "cuda"
