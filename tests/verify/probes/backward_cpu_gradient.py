# expect: device-error
# rule: y.backward(grad) with grad on another device than y fails in the autograd engine
# message: invalid gradient at index 0 - expected device cuda:0 but got cpu
import torch

x = torch.randn(3, device="cuda", requires_grad=True)
y = x * 2
y.backward(torch.ones(3))
