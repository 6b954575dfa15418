# expect: ok
# rule: a gradient assigned on its tensor's device is accepted (and None always is)
import torch

weight = torch.nn.Parameter(torch.randn(3, device="cuda"))
weight.grad = torch.zeros(3, device="cuda")
weight.grad = None
