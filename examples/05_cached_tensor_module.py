"""A custom module keeps a cached tensor as a plain attribute next to a parameter.

`model.to(device)` moves the parameter but not the plain tensor attribute, so
`forward` mixes devices on a GPU. devmod registers the tensor as a non-persistent
buffer, which moves with the model and keeps the state_dict keys (DM301).
"""
# expect-before: device-error
import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class OffsetLayer(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.offset = torch.linspace(-1.0, 1.0, size)
        self.scale = nn.Parameter(torch.ones(size))

    def forward(self, x):
        return x * self.scale + self.offset


layer = OffsetLayer(10).to(device)
x = torch.randn(3, 10, device=device)
print("output", tuple(layer(x).shape), "keys", sorted(layer.state_dict()))
