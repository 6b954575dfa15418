# expect: device-error
# rule: masked_fill checks that the mask is on the tensor's device
# message: expected self and mask to be on the same device, but got mask on cpu and self on cuda:0
import torch

scores = torch.randn(2, 3, device="cuda")
mask = torch.tensor([[True, False, True], [False, False, True]])
scores = scores.masked_fill(mask, float("-inf"))
