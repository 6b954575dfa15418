# expect: ok
# rule: broadcast_all makes a Python number a tensor on the first tensor's device
import torch

loc = torch.zeros(3, device="cuda")
normal = torch.distributions.Normal(loc, 1.0)
log_p = normal.log_prob(torch.randn(3, device="cuda"))
assert log_p.device.type == "cuda"
