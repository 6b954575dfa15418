# expect: device-error
# rule: mse_loss broadcasts a 0-dim CPU target to the input's shape first, so it is no longer a scalar
import warnings

import torch
import torch.nn.functional as F

warnings.simplefilter("ignore")  # "Using a target size ... different to the input size"
prediction = torch.randn(3, device="cuda")
loss = F.mse_loss(prediction, torch.tensor(1.0))
