"""How fast is devmod, relative to just parsing the same files? (`python benchmarks/bench_engine.py`)

Absolute times depend on the machine, so every number is reported next to a baseline
measured IN THE SAME RUN on the same corpus:

  baseline  ast.parse              CPython's own parser (the floor for any Python tool)
  baseline  libcst parse + code    libcst.parse_module + module.code (the floor for a libcst codemod)
  devmod    engine, in-process     codemods.engine.transform_source on each file, one process
  devmod    apply --check -j N     the real CLI end to end in a subprocess (start-up, discovery, pool)

The corpus is generated from templates (training scripts, nn.Modules, data pipelines)
into a temporary folder; nothing is written anywhere else. Not a test: timings are
never asserted.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import libcst as cst  # noqa: E402
from importlib.metadata import version  # noqa: E402

from codemods.config import Config  # noqa: E402
from codemods.engine import transform_source  # noqa: E402

LIBCST_VERSION = version("libcst")

HEADER = '''"""Generated benchmark file {index}."""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

'''

MODEL = '''
class Block{n}(nn.Module):
    """A residual block with a cached mask (a DM301 shape)."""

    def __init__(self, dim: int = {dim}) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, dim * 4)
        self.fc2 = nn.Linear(dim * 4, dim)
        self.norm = nn.LayerNorm(dim)
        self.mask = torch.ones(dim)

    def forward(self, x):
        h = self.norm(x)
        h = F.gelu(self.fc1(h))
        noise = torch.randn(h.shape) * 0.01
        h = self.fc2(h + noise)
        return x + h * self.mask
'''

DATASET = '''
class Rows{n}(Dataset):
    def __init__(self, size: int = 128) -> None:
        self.rows = [[float(i + j) for j in range({dim})] for i in range(size)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index):
        row = torch.tensor(self.rows[index])
        return {{"x": row, "y": torch.tensor(index % 3)}}
'''

TRAIN = '''
def train_{n}(epochs: int = 2, lr: float = 1e-3):
    model = nn.Sequential(Block{n}(), nn.Linear({dim}, 3)).cuda()
    criterion = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 1.0]))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    loader = DataLoader(Rows{n}(), batch_size=16, shuffle=True)
    history = []
    for epoch in range(epochs):
        for batch in loader:
            out = model(batch["x"])
            loss = criterion(out, batch["y"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        history.append(loss.item())
        scale = torch.zeros(1, device="cuda:0")
        print(f"epoch {{epoch}}: {{history[-1]:.3f}} {{scale}}")
    return model, history
'''

EVAL = '''
def evaluate_{n}(model, path: str = "ckpt_{n}.pt"):
    state = torch.load(path)
    model.load_state_dict(state)
    model.eval()
    xs = torch.randn(8, {dim}).to("cuda:0")
    with torch.no_grad():
        preds = model(xs).argmax(1)
    return preds.numpy()
'''

PLAIN = '''
def helper_{n}(values, factor: float = {dim}.0):
    # Pure Python between the torch code: most real files are mostly this.
    total = 0.0
    for index, value in enumerate(values):
        if index % 2:
            total += math.sqrt(abs(value)) * factor
        else:
            total -= value / (index + 1)
    return {{"total": total, "count": len(values), "path": os.path.join("runs", str(factor))}}
'''

TEMPLATES = (MODEL, DATASET, TRAIN, EVAL, PLAIN, PLAIN)


def make_corpus(folder: Path, files: int, lines: int, seed: int = 0) -> list[Path]:
    """``files`` torch files of about ``lines`` lines each, built from the templates."""
    rng = random.Random(seed)
    paths = []
    for index in range(files):
        parts, count, n = [HEADER.format(index=index)], 0, 0
        while count < lines:
            n += 1
            dim = rng.choice((16, 32, 64, 128))
            for template in (MODEL, DATASET, TRAIN, EVAL) if n == 1 else (rng.choice(TEMPLATES),):
                text = template.format(n=n, dim=dim)
                parts.append(text)
                count += text.count("\n")
        path = folder / f"file_{index:04d}.py"
        path.write_text("\n".join(parts) + "\nif __name__ == '__main__':\n    train_1()\n")
        paths.append(path)
    return paths


def timed(function: Callable[[], object], repeat: int) -> float:
    """Best of ``repeat`` runs (the least disturbed by other load on the machine)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=20, help="corpus size (default 20)")
    parser.add_argument("--lines", type=int, default=150, help="about this many lines per file (default 150)")
    parser.add_argument("--jobs", type=int, default=2, help="-j for the end-to-end run (default 2)")
    parser.add_argument("--repeat", type=int, default=1, help="best of N for each measurement (default 1)")
    parser.add_argument("--corpus", type=Path, help="time these .py files instead of a generated corpus")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="devmod-bench-") as tmp:
        folder = Path(tmp)
        if args.corpus:
            sources = sorted(args.corpus.rglob("*.py")) if args.corpus.is_dir() else [args.corpus]
            paths = []
            for index, source in enumerate(sources):
                paths.append(folder / f"{index:04d}_{source.name}")
                paths[-1].write_bytes(source.read_bytes())
        else:
            paths = make_corpus(folder, args.files, args.lines)
        texts = [p.read_text(encoding="utf-8") for p in paths]
        total_lines = sum(t.count("\n") for t in texts)
        print(f"corpus: {len(texts)} files, {total_lines} lines, {sum(map(len, texts)) / 1e6:.2f} MB; "
              f"python {sys.version.split()[0]}, libcst {LIBCST_VERSION}, "
              f"{os.cpu_count()} cores")

        config = Config()
        changed = sum(transform_source(t, "bench.py", config).changed for t in texts[:3])
        assert changed, "the corpus does not exercise the rules"

        rows = [
            ("baseline: ast.parse", timed(lambda: [ast.parse(t) for t in texts], args.repeat)),
            ("baseline: libcst parse + code", timed(lambda: [cst.parse_module(t).code for t in texts], args.repeat)),
            ("devmod engine, in-process, jobs=1",
             timed(lambda: [transform_source(t, "bench.py", config) for t in texts], args.repeat)),
        ]
        command = [sys.executable, "-m", "codemods", "apply", "--check", "-q", "-j", str(args.jobs), str(folder)]
        rows.append((f"devmod apply --check -j {args.jobs} (subprocess)",
                     timed(lambda: subprocess.run(command, capture_output=True, check=False), args.repeat)))
        startup = timed(lambda: subprocess.run([sys.executable, "-m", "codemods", "--version"],
                                               capture_output=True, check=False), args.repeat)
        rows.append(("  of which CLI start-up (devmod --version)", startup))

    base = rows[1][1]
    print(f"\n{'measurement':46} {'seconds':>9} {'ms/file':>9} {'lines/s':>9} {'x libcst':>9}")
    for name, seconds in rows:
        print(f"{name:46} {seconds:9.2f} {seconds * 1000 / len(texts):9.1f} "
              f"{total_lines / seconds:9.0f} {seconds / base:9.1f}")


if __name__ == "__main__":
    main()
