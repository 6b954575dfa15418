# expect: device-error
# rule: torch.autograd.grad checks grad_outputs against the outputs' devices like backward does
# message: invalid gradient at index 0 - expected device cuda:0 but got cpu
import torch

x = torch.randn(3, device="cuda", requires_grad=True)
y = x ** 2
(g,) = torch.autograd.grad(y, x, grad_outputs=torch.ones(3))
