# expect: ok
# rule: masked_fill reads a 0-dim value tensor as a number, wherever it lives
import torch

scores = torch.randn(3, device="cuda")
out = scores.masked_fill(scores > 0, torch.tensor(0.0))
assert out.device.type == "cuda"
