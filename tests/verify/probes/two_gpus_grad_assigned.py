# expect: device-error
# gpus: 2
# rule: assigning .grad between two GPUs fails the device-index check (THPVariable_set_grad)
# message: attempting to assign a gradient located on device with index '1' to a tensor located on device with index '0'. Please ensure that the gradient and the tensor are on the same device
import torch

weight = torch.nn.Parameter(torch.randn(3, device="cuda:0"))
weight.grad = torch.zeros(3, device="cuda:1")
