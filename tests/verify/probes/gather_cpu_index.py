# expect: device-error
# rule: gather's generated check: index on the input's device
# message: Expected all tensors to be on the same device, but got index is on cpu, different from other tensors on cuda:0 (when checking argument in method wrapper_CUDA_gather)
import torch

logits = torch.randn(2, 3, device="cuda")
picked = logits.gather(1, torch.tensor([[0], [2]]))
