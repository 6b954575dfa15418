# expect: device-error
# rule: assigning .grad checks the gradient's device type against its tensor's (THPVariable_set_grad)
# message: attempting to assign a gradient with device type 'cpu' to a tensor with device type 'cuda'. Please ensure that the gradient and the tensor are on the same device
# hint: `.grad`
import torch

weight = torch.nn.Parameter(torch.randn(3, device="cuda"))
weight.grad = torch.zeros(3)
