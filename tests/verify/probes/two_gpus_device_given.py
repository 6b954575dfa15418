# expect: device-error
# gpus: 2
# rule: cuda:1 vs cuda:0 mismatch like cpu vs cuda; both tensors were made with device=, so the hint names the two GPUs and does not blame a missing device=
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!
# hint: two different GPUs (cuda:0 and cuda:1)
# hint-not: device=
import torch

weights = torch.ones(4, device="cuda:0")
features = torch.ones(4, device="cuda:1")
score = weights * features
