"""The same bugs behind aliased imports: `import torch as th`, `from torch import nn as tnn`,
`from torch.utils.data import DataLoader as DL`.

The model is built and never moved while each batch is moved to the device, so the
first layer sees two devices. devmod resolves the aliases and moves the model where
it is built (DM202); the dataset tensors stay on the CPU.
"""
# expect-before: device-error
import torch as th
from torch import nn as tnn
from torch.utils.data import DataLoader as DL, TensorDataset

th.manual_seed(0)
dev = th.device("cuda" if th.cuda.is_available() else "cpu")

net = tnn.Sequential(tnn.Linear(3, 4), tnn.Tanh(), tnn.Linear(4, 1))
opt = th.optim.SGD(net.parameters(), lr=0.1)
data = DL(TensorDataset(th.randn(32, 3), th.randn(32, 1)), batch_size=8)

for xb, yb in data:
    xb, yb = xb.to(dev), yb.to(dev)
    opt.zero_grad()
    loss = tnn.functional.mse_loss(net(xb), yb)
    loss.backward()
    opt.step()
print(f"loss {loss.item():.4f}")
