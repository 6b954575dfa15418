"""A slot encoder and a trust-ratio step that follow their input's GPU with `get_device()`.

`x.get_device()` is the CUDA index of `x`, and -1 when `x` is on the CPU. Passed as a
device (`.to(x.get_device())`, `device=x.get_device()`), it works on a GPU and fails on
a machine without one: "Device index must not be negative". devmod passes `x.device`
instead (DM205): the same `cuda:N` on a GPU, and `cpu` elsewhere. The index compared as a
number (`grad.get_device() >= 0`) stays as written.
"""
# expect-before: cpu-failure
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class SlotEncoder(nn.Module):
    """Appends a one-hot slot id to every slot's features."""

    def __init__(self, slots: int, features: int, hidden: int):
        super().__init__()
        self.slots = slots
        self.proj = nn.Linear(features + slots, hidden)

    def forward(self, feats):
        slot_ids = torch.eye(self.slots).expand(feats.size(0), -1, -1).to(feats.get_device())
        return self.proj(torch.cat((feats, slot_ids), dim=-1))


def trust_ratio(weight, grad, eta=0.001):
    """How far to scale a layer's step (a layer-wise adaptive rate)."""
    where = grad.get_device()
    one = torch.ones(1).to(where)
    w_norm, g_norm = weight.norm(), grad.norm()
    ratio = torch.where(g_norm > 0, eta * w_norm / g_norm, one)
    on_gpu = "gpu" if grad.get_device() >= 0 else "cpu"
    return ratio.item(), on_gpu


encoder = SlotEncoder(slots=4, features=6, hidden=8).to(device)
features = torch.randn(2, 4, 6, device=device)
encoder(features).sum().backward()
for p in encoder.parameters():
    print(trust_ratio(p.detach(), p.grad))
