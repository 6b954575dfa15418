"""A model that comes out of a factory function, fed inputs built the old way.

Before the rewrite the model is put on the device by hand while its inputs are not: a
legacy `torch.FloatTensor([[...]])`, labels from `torch.LongTensor`, a batch returned by
a helper that wraps NumPy data, and a `.type(torch.FloatTensor)` cast (always the CPU).
devmod must move the whole group: the factory-built model, every input, the targets.
It must not append `.to(device)` to the loss value, and every `.numpy()` on a moved
tensor gets `.cpu()`. The data helper itself is left alone: its caller moves the batch.
"""
# expect-before: device-error
import numpy as np
import torch
import torch.nn as nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Scorer(nn.Module):
    def __init__(self, width=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, 8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, x):
        return self.body(x)


def build_scorer():
    return Scorer(3)


def noisy_batch(n):
    values = np.random.default_rng(0).normal(size=(n, 3))
    return torch.from_numpy(values).float()


scorer = build_scorer().to(device)
probe = torch.FloatTensor([[0.5, -0.5, 1.0]])
targets = torch.LongTensor([1, 0, 1, 0])
points = torch.cat((torch.ones(2, 3), -torch.ones(2, 3))).type(torch.FloatTensor)
optimizer = torch.optim.SGD(scorer.parameters(), lr=0.1)
for step in range(3):
    batch = noisy_batch(4)
    loss = nn.CrossEntropyLoss()(scorer(batch + points), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
critic = build_scorer()
print(critic(torch.randn(1, 3)).shape)
shift = 0.1 * torch.rand(4, 2) + scorer(points)
print(scorer(probe).argmax(1).item(), shift.detach().numpy().shape, "%.3f" % loss.detach().numpy())
