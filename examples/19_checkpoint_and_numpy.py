"""A checkpoint loaded without `map_location`, and `.numpy()` on a model output.

On a GPU the output lives on the device and `.numpy()` raises "can't convert cuda:0
device type tensor to numpy"; a checkpoint saved on a GPU machine and loaded without
`map_location` fails on a CPU-only one. devmod adds `map_location=device` (DM302) and
`.cpu()` before `.numpy()` (DM303).
"""
# expect-before: device-error
import os
import tempfile

import torch
import torch.nn as nn

torch.manual_seed(0)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

model = nn.Linear(4, 2).to(device)
path = os.path.join(tempfile.mkdtemp(), "linear.pt")
torch.save(model.state_dict(), path)

restored = nn.Linear(4, 2).to(device)
restored.load_state_dict(torch.load(path))
with torch.no_grad():
    scores = restored(torch.randn(3, 4, device=device))
print("scores", scores.detach().numpy().round(3).tolist())
