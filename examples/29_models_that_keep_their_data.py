"""Three models from a CPU-only notebook-style script, and what devmod does with each group.

- An actor-critic is run through its own methods (`policy.pi(obs)`, `policy.v(obs)`) on
  observations made with `torch.from_numpy`, here and in `rollout()`, which the main block
  hands the policy to: the policy and every observation move together.
- A probe network is an empty `nn.Sequential()` filled with `add_module` afterwards: a `.to()`
  on the empty container would leave its layers behind, so it stays with its input and devmod
  reports it.
- A linear head is fed by `features()`, which computes with a weight drawn from
  `Normal(...).sample(...)`, a CPU tensor devmod does not move: the head and the factory
  beside that weight stay on the CPU, and devmod reports the head.
"""
# expect-before: cpu-only
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Normal

torch.manual_seed(0)
rng = np.random.default_rng(0)


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 16)
        self.actor = nn.Linear(16, 2)
        self.critic = nn.Linear(16, 1)

    def pi(self, x):
        return self.actor(torch.relu(self.body(x))).softmax(-1)

    def v(self, x):
        return self.critic(torch.relu(self.body(x)))


def rollout(step, policy):
    obs = rng.random(4).astype(np.float32)
    return policy.pi(torch.from_numpy(obs)).argmax().item()


W = Normal(0.0, 0.1).sample((4, 3))
shift = torch.zeros(3)


def features(x):
    return torch.matmul(x, W) + shift


if __name__ == "__main__":
    policy = ActorCritic()
    opt = torch.optim.SGD(policy.parameters(), lr=0.01)
    for step in range(3):
        obs = torch.from_numpy(rng.random((8, 4)).astype(np.float32))
        returns = torch.from_numpy(rng.random((8, 1)).astype(np.float32))
        advantage = returns - policy.v(obs)
        loss = -(policy.pi(obs)[:, :1].log() * advantage.detach()).mean() + advantage.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(step, round(loss.item(), 4), rollout(step, policy))

    probe = nn.Sequential()
    probe.add_module("hidden", nn.Linear(4, 8))
    probe.add_module("out", nn.Linear(8, 2))
    print(probe(torch.ones(2, 4)).shape)

    head = nn.Linear(3, 1)
    print(head(features(torch.rand(5, 4))).shape)
