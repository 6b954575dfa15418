"""How much slower a small training loop runs on the simulated cuda:0 than on the plain CPU.

The runs happen in this process, alternately, after a warm-up of each; the ratios of the
medians and of the fastest runs are printed, of CPU time (this process's, one torch thread) and
of wall time. On a shared machine read the fastest runs: interference from other processes only
ever adds time. A third run, under a ``TorchFunctionMode`` that only calls the function on the
plain CPU, shows the floor any simulation built on such a mode pays (it takes the CPU code
paths, e.g. single-tensor Adam, where the simulated run takes the CUDA ones). The simulation adds Python work per torch call (a device check and a
table entry), not per element, so the ratio is highest for tiny tensors like these and
falls as tensors grow (try --width 1024).

    python benchmarks/bench_simulation.py [--repeat 5] [--steps 100] [--width 128] [--no-floor]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from torch.overrides import TorchFunctionMode  # noqa: E402

from codemods.verify.simulate import simulated_cuda  # noqa: E402


class NoOpMode(TorchFunctionMode):
    """Calls every torch function unchanged: the cost of the mechanism alone."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


def no_op(steps: int, width: int) -> tuple[float, float]:
    with NoOpMode():
        return train(steps, width)


def train(steps: int, width: int) -> tuple[float, float]:
    """A complete small loop (DataLoader, MLP, Adam, scheduler, clipping), placed with the
    usual `device = cuda if available else cpu`; returns the wall-clock and CPU seconds it took."""
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(steps * 32, 64), torch.randint(0, 10, (steps * 32,)))
    loader = DataLoader(data, batch_size=32, shuffle=True, pin_memory=torch.cuda.is_available())
    model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, 10)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
    loss_fn = nn.CrossEntropyLoss()
    start, start_cpu = time.perf_counter(), time.process_time()
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
    loss.item()
    return time.perf_counter() - start, time.process_time() - start_cpu


def simulated(steps: int, width: int) -> tuple[tuple[float, float], int]:
    with simulated_cuda() as sim:
        seconds = train(steps, width)
    assert sim.stats.param_devices == {"cuda:0"}, sim.stats.param_devices
    return seconds, sim.stats.ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps per run")
    parser.add_argument("--width", type=int, default=128, help="hidden layer width")
    parser.add_argument("--no-floor", action="store_true", help="skip the no-op TorchFunctionMode run")
    options = parser.parse_args()
    torch.set_num_threads(1)  # steadier timings
    train(10, options.width), simulated(10, options.width), no_op(10, options.width)  # warm-up
    plain, sim, floor, ops = [], [], [], 0
    for _ in range(options.repeat):
        plain.append(train(options.steps, options.width))
        seconds, ops = simulated(options.steps, options.width)
        sim.append(seconds)
        if not options.no_floor:
            floor.append(no_op(options.steps, options.width))
    base, slow = statistics.median(p[0] for p in plain), statistics.median(s[0] for s in sim)
    base_cpu, slow_cpu = statistics.median(p[1] for p in plain), statistics.median(s[1] for s in sim)
    fast_cpu = min(p[1] for p in plain), min(s[1] for s in sim)
    print(f"training loop: {options.steps} steps, batch 32, MLP 64-{options.width}-{options.width}-10, Adam, "
          f"torch {torch.__version__}, {options.repeat} runs each")
    print(f"plain CPU:        {base * 1000:8.1f} ms wall, {base_cpu * 1000:8.1f} ms CPU (medians)")
    print(f"simulated cuda:0  {slow * 1000:8.1f} ms wall, {slow_cpu * 1000:8.1f} ms CPU (medians), {ops} torch calls "
          f"checked, {(slow_cpu - base_cpu) / max(ops, 1) * 1e6:.1f} us CPU added per call")
    # CPU time is the figure to compare on a shared machine: other processes inflate wall time.
    print(f"overhead ratio (simulated / plain): {slow_cpu / base_cpu:.2f}x CPU time, {slow / base:.2f}x wall time")
    print(f"fastest runs (simulated / plain):   {fast_cpu[1] / fast_cpu[0]:.2f}x CPU time "
          f"({fast_cpu[0] * 1000:.1f} ms plain, {fast_cpu[1] * 1000:.1f} ms simulated)")
    if floor:
        floor_cpu = statistics.median(f[1] for f in floor)
        print(f"floor, a no-op TorchFunctionMode on the CPU path: {floor_cpu / base_cpu:.2f}x CPU time (medians), "
              f"{min(f[1] for f in floor) / fast_cpu[0]:.2f}x (fastest)")

if __name__ == "__main__":
    main()
