# expect: device-error
# rule: out= is an output too: a 0-dim CPU out tensor for a CUDA op fails
# message: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
import torch

out = torch.tensor(0.0)
torch.add(torch.tensor(1.0, device="cuda"), torch.tensor(2.0, device="cuda"), out=out)
