# expect: ok
# rule: CPU long/bool indices into a CUDA tensor are allowed (PyTorch moves them)
import torch

table = torch.randn(5, 2, device="cuda")
rows = table[torch.tensor([0, 3])]
assert rows.device.type == "cuda"
