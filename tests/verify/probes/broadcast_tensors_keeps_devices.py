# expect: ok
# rule: broadcast_tensors itself does no device check and leaves each input on its own device
import torch

x = torch.randn(3, device="cuda")
a, b = torch.broadcast_tensors(x, torch.tensor(1.0))
assert a.device.type == "cuda", a.device
assert b.device.type == "cpu" and b.dim() == 1, (b.device, b.dim())
