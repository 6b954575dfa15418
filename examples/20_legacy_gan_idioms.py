"""Older GAN-style code: `Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor`,
`Variable(...)` wrappers and `.cuda()` behind `if cuda:` guards.

The guards and the alias keep most tensors on the right device, but the noise is made
with a plain `torch.randn`, so on a GPU the generator sees a CPU input. devmod collapses
the guards into `.to(device)` (DM103) and creates the noise on the device (DM201).
"""
# expect-before: device-error
import torch
import torch.nn as nn
from torch.autograd import Variable

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
optimizer_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
for step in range(3):
    valid = Variable(Tensor(8, 1).fill_(1.0), requires_grad=False)
    z = torch.randn(8, 4)
    optimizer_g.zero_grad()
    g_loss = adversarial_loss(discriminator(generator(z)), valid)
    g_loss.backward()
    optimizer_g.step()
print(f"generator loss {g_loss.item():.4f}")
