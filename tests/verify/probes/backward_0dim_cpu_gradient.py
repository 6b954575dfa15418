# expect: ok
# rule: the autograd engine moves a 0-dim gradient to the output's device
import torch

x = torch.randn(3, device="cuda", requires_grad=True)
loss = (x * 2).sum()
loss.backward(torch.tensor(1.0))
assert x.grad.device.type == "cuda"
