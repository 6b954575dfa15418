# expect: ok
# gpus: 2
# rule: tensors on one GPU work together; .to("cuda:0") moves a cuda:1 tensor
import torch

assert torch.cuda.device_count() >= 2
a = torch.randn(3, device="cuda:1")
b = torch.randn(3, device=torch.device("cuda", 1))
c = (a + b).to("cuda:0") * torch.randn(3, device="cuda")
assert c.device == torch.device("cuda:0") and a.device == torch.device("cuda:1")
