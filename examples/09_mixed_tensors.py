"""Two tensors, one moved to the GPU and one forgotten, plus an asynchronous copy.

`first` stays on the CPU while `second` goes to `"cuda"` when a GPU exists, so
`first + second` fails with "Expected all tensors to be on the same device". devmod
creates both on the shared device (DM201, DM102), after which the CUDA check around
`second` has two identical branches and collapses (DM103). The staging tensor is deliberately
made on the CPU (`device=host`) and copied with `non_blocking=True`: that copy is
already right and must stay as written.
"""
# expect-before: device-error
import torch

torch.manual_seed(0)
first = torch.tensor([1.0, 2.0, 3.0])
second = torch.tensor([4.0, 5.0, 6.0]).to("cuda") if torch.cuda.is_available() else torch.tensor([4.0, 5.0, 6.0])
total = first + second

host = torch.device("cpu")
staging = torch.randn(256, 256, device=host)
with torch.no_grad():
    copied = staging.to(second.device, non_blocking=True)
    print("sum", total.tolist(), "copy on", copied.device, "mean", round(float(copied.mean()), 3))
