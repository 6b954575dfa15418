"""Already device-correct, in the style of lucidrains' repositories: a `device` property
read from a buffer, tensors created with `device=self.device`, `new_zeros` for shapes.

devmod must leave this file byte-identical.
"""
# expect-before: clean
import torch
from torch import nn


class RotaryLite(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.proj = nn.Linear(dim, dim)

    @property
    def device(self):
        return self.inv_freq.device

    def forward(self, x):
        n = x.shape[-2]
        t = torch.arange(n, device=self.device).type_as(self.inv_freq)
        freqs = torch.einsum("i,j->ij", t, self.inv_freq)
        shift = x.new_zeros(x.shape[-1])
        return self.proj(x + torch.cat((freqs.sin(), freqs.cos()), dim=-1) + shift)


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    module = RotaryLite(8).to(device)
    print("out", tuple(module(torch.randn(2, 5, 8, device=device)).shape))
