"""Overhead of the simulated GPU on a small training loop, as a ratio against the plain CPU
run measured in the same process (never a timed test).

    python benchmarks/bench_simulation.py [--steps 200]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn as nn

from codemods.verify import simulated_cuda


def train(steps: int) -> float:
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(64, 32, device=device)
    y = torch.randint(0, 10, (64,), device=device)
    start = time.perf_counter()
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    plain, simulated = [], []
    train(10)  # warm-up
    for _ in range(args.repeats):
        plain.append(train(args.steps))
        with simulated_cuda():
            simulated.append(train(args.steps))
    base, sim = statistics.median(plain), statistics.median(simulated)
    print(f"{'run':<12}{'median s':>10}{'ratio':>8}")
    print(f"{'plain CPU':<12}{base:>10.3f}{1.0:>8.2f}")
    print(f"{'simulated':<12}{sim:>10.3f}{sim / base:>8.2f}")


if __name__ == "__main__":
    main()
