"""Older GAN-style code: `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`,
`Variable(Tensor(n, 1).fill_(1.0), requires_grad=False)` targets, real samples moved with
`x.type(Tensor)`, and `.cuda()` behind `if cuda:` guards.

The guards and the alias keep most tensors on the right device, but the noise is made
with a plain `torch.randn`, so on a GPU the generator sees a CPU input: "Expected all
tensors to be on the same device". devmod collapses the guards into `.to(device)`
(DM103), creates the noise on the device (DM201) and modernises the legacy idioms
(DM304): `torch.ones(n, 1, device=device)`, `x.to(device, torch.float32)`, no `Variable`.
The dataset tensors stay on the CPU.
"""
# expect-before: device-error
import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
cuda = True if torch.cuda.is_available() else False

generator = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6), nn.Tanh())
discriminator = nn.Sequential(nn.Linear(6, 1), nn.Sigmoid())
adversarial_loss = nn.BCELoss()
if cuda:
    generator.cuda()
    discriminator.cuda()
    adversarial_loss.cuda()

Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
samples = DataLoader(TensorDataset(torch.rand(24, 6, dtype=torch.float64) * 2 - 1), batch_size=8)
optimizer_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
optimizer_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
for (batch,) in samples:
    valid = Variable(Tensor(batch.size(0), 1).fill_(1.0), requires_grad=False)
    fake = Variable(Tensor(batch.size(0), 1).fill_(0.0), requires_grad=False)
    real = Variable(batch.type(Tensor))

    optimizer_g.zero_grad()
    z = torch.randn(batch.size(0), 4)
    generated = generator(z)
    g_loss = adversarial_loss(discriminator(generated), valid)
    g_loss.backward()
    optimizer_g.step()

    optimizer_d.zero_grad()
    real_loss = adversarial_loss(discriminator(real), valid)
    fake_loss = adversarial_loss(discriminator(generated.detach()), fake)
    d_loss = (real_loss + fake_loss) / 2
    d_loss.backward()
    optimizer_d.step()
print(f"generator loss {g_loss.item():.4f}, discriminator loss {d_loss.item():.4f}")
