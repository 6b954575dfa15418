"""Two tensors, one moved to the GPU and one forgotten, plus an asynchronous copy.

Adding them fails with "Expected all tensors to be on the same device". devmod creates
both on the shared device (DM201) and replaces the hard-coded `"cuda"` (DM102).
"""
# expect-before: device-error
import torch

torch.manual_seed(0)
first = torch.tensor([1.0, 2.0, 3.0])
second = torch.tensor([4.0, 5.0, 6.0]).to("cuda") if torch.cuda.is_available() else torch.tensor([4.0, 5.0, 6.0])
total = first + second

host = torch.device("cpu")
big = torch.randn(256, 256)
with torch.no_grad():
    copied = big.to(second.device, non_blocking=True)
print("sum", total.tolist(), "copy on", copied.device)
