# expect: device-error
# rule: masked_fill's mask check has no CPU-scalar exemption, even for a 0-dim mask
# message: expected self and mask to be on the same device, but got mask on cpu and self on cuda:0
import torch

scores = torch.randn(3, device="cuda")
scores.masked_fill_(torch.tensor(True), 0.0)
