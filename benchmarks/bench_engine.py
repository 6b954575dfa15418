"""How fast is devmod, next to just parsing the same files? (`python benchmarks/bench_engine.py [CORPUS]`)

Absolute times depend on the machine, so every number is printed next to baselines measured
IN THE SAME RUN on the same files, with the repeats interleaved (one round runs every
measurement once, then the next round), so a burst of load on a shared machine hits all rows:

  ast.parse                     CPython's own parser, one process (the floor for any Python tool)
  libcst parse + codegen        libcst.parse_module(src).code, one process (the floor for a libcst codemod)
  devmod apply --check -j N     the real CLI end to end in a subprocess; "cold" starts from an empty
                                cache folder, "warm" re-runs on the cache the cold run left
  torchfix -j 2                 TorchFix, when --torchfix names its executable (it pins an older
                                libcst, so it lives in its own virtual environment)

Then the scaling check (one module repeated 1, 2, 4 and 8 times in one file, in-process) and
the peak resident memory of the CLI's main process and of its largest worker.
CORPUS is a folder (searched like `devmod apply` does) or omitted for a generated corpus. The
benchmark fetches nothing and writes only to a temporary folder. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import libcst as cst  # noqa: E402

from codemods.config import Config  # noqa: E402
from codemods.discovery import iter_python_files  # noqa: E402
from codemods.engine import SourceError, transform_source  # noqa: E402

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

# Runs the CLI in a process of its own and prints its peak RSS and its largest child's (a worker).
# The CLI's own peak is read from /proc (VmHWM, this process's memory only) where there is one:
# Linux carries ru_maxrss across exec, so a CLI started by this (large) benchmark process would
# report the benchmark's own peak (the "182 MiB main" of earlier tables was that).
CLI_WITH_RSS = (
    "import resource, sys\n"
    "from codemods.cli import main\n"
    "try:\n    main(sys.argv[1:], prog_name='devmod')\nexcept SystemExit:\n    pass\n"
    "own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "try:\n    own = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
    "except (OSError, StopIteration, ValueError):\n    pass\n"
    "sys.stderr.write('\\nDEVMOD-RSS-KB %d %d\\n' % (own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
)


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


class Row:
    """One measurement: wall and CPU seconds over the rounds, and the peak RSS seen (KiB: main, worker).

    CPU seconds (user + system, workers included) are shown too: on a machine shared with other
    work, wall time mostly measures the neighbours, CPU time much less so.
    """

    def __init__(self, name: str, run: Callable[[], tuple[float, float, tuple[int, int] | None]]) -> None:
        self.name, self.run, self.times, self.cpu, self.rss = name, run, [], [], (0, 0)

    def once(self) -> None:
        seconds, cpu, rss = self.run()
        self.times.append(seconds)
        self.cpu.append(cpu)
        if rss:
            self.rss = (max(self.rss[0], rss[0]), max(self.rss[1], rss[1]))


def in_process(function: Callable[[], object]) -> Callable[[], tuple[float, float, None]]:
    def run() -> tuple[float, float, None]:
        start, cpu = time.perf_counter(), time.process_time()
        function()
        return time.perf_counter() - start, time.process_time() - cpu, None
    return run


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def subprocess_run(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
                   ) -> tuple[float, float, tuple[int, int] | None]:
    start, cpu = time.perf_counter(), _children_cpu()
    # (``cwd``: ``python -c`` puts the working folder first on sys.path, before PYTHONPATH)
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False, cwd=cwd)
    seconds, cpu = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode not in (0, 1):
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        print(f"  note: {' '.join(command[:3])}... exited {done.returncode}: {' / '.join(tail)}", file=sys.stderr)
    for line in done.stderr.splitlines():
        if line.startswith("DEVMOD-RSS-KB"):
            main_kb, worker_kb = map(int, line.split()[1:])
            return seconds, cpu, (main_kb, worker_kb)
    return seconds, cpu, None


def frozen_code(scratch: Path) -> Path:
    """A copy of devmod's package taken when the benchmark starts: every CLI row runs the same
    code, even when the checkout is edited or merged into during a run of an hour (the cache
    key includes devmod's code, so a change between the cold and the warm row empties the cache)."""
    import shutil
    target = scratch / "code"
    shutil.copytree(ROOT / "codemods", target / "codemods", ignore=shutil.ignore_patterns("__pycache__"))
    return target


def devmod_rows(corpus: Path, jobs: int, scratch: Path, code: Path) -> list[Row]:
    """Cold (a fresh cache folder each round) and warm (the folder the cold run just filled)."""
    state = {"round": 0}
    base = [sys.executable, "-c", CLI_WITH_RSS, "apply", "--check", "-q", "-j", str(jobs), str(corpus)]

    def env_for(round_: int) -> dict[str, str]:
        # Without PYTHONDONTWRITEBYTECODE: a user's devmod has its bytecode written, and a warm
        # run that recompiles every changed module of devmod measures the shell, not devmod.
        inherited = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        return {**inherited, "DEVMOD_CACHE_DIR": str(scratch / f"cache-j{jobs}-{round_}"),
                "PYTHONPATH": str(code) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def cold() -> tuple[float, float, tuple[int, int] | None]:
        state["round"] += 1
        return subprocess_run(base, env_for(state["round"]), cwd=scratch)

    def warm() -> tuple[float, float, tuple[int, int] | None]:
        return subprocess_run(base, env_for(state["round"]), cwd=scratch)

    return [Row(f"devmod apply --check -j {jobs}, cold", cold), Row(f"devmod apply --check -j {jobs}, warm", warm)]


def scaling(text: str, copies: tuple[int, ...] = (1, 2, 4, 8), repeat: int = 1) -> list[tuple[int, float, float]]:
    """(copies, libcst seconds, devmod seconds) for ``text`` repeated in one module, in-process."""
    config, rows = Config(), []
    for count in copies:
        module = "\n".join([text] * count)
        parse = min(_seconds(lambda: cst.parse_module(module).code) for _ in range(repeat))
        engine = min(_seconds(lambda: _transform(module, config)) for _ in range(repeat))
        rows.append((count, parse, engine))
    return rows


def _transform(text: str, config: Config) -> None:
    try:
        transform_source(text, "bench.py", config)
    except SourceError:
        pass


def _seconds(function: Callable[[], object]) -> float:
    start = time.process_time()
    function()
    return time.process_time() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("corpus", nargs="?", type=Path, help="a folder of Python files (default: generated)")
    parser.add_argument("--files", type=int, default=20, help="generated corpus: files (default 20)")
    parser.add_argument("--lines", type=int, default=150, help="generated corpus: lines per file (default 150)")
    parser.add_argument("--jobs", default="1,2", help="-j values for the CLI rows (default 1,2)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved rounds; medians are shown (default 3)")
    parser.add_argument("--torchfix", help="TorchFix's executable, e.g. /path/to/torchfix-venv/bin/torchfix")
    parser.add_argument("--scaling-file", type=Path,
                        help="the module repeated 1-8 times (default: the generated training file)")
    parser.add_argument("--no-scaling", action="store_true", help="skip the scaling check")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="devmod-bench-") as tmp:
        scratch = Path(tmp)
        if args.corpus is None:
            (scratch / "corpus").mkdir()
            make_corpus(scratch / "corpus", args.files, args.lines)
            corpus = scratch / "corpus"
        else:
            corpus = args.corpus.resolve()
        files = list(iter_python_files([str(corpus)], []))
        texts = []
        for path in files:
            try:
                texts.append(Path(path).read_text(encoding="utf-8"))
            except (UnicodeDecodeError, OSError):
                pass
        total_lines = sum(t.count("\n") for t in texts)
        torch_files = sum("torch" in t for t in texts)
        print(f"corpus: {corpus.name}: {len(texts)} files ({torch_files} mention torch), {total_lines} lines, "
              f"{sum(map(len, texts)) / 1e6:.1f} MB; python {sys.version.split()[0]}, "
              f"libcst {version('libcst')}, {os.cpu_count()} cores, {args.repeat} interleaved rounds")

        def libcst_round_trip() -> None:
            for text in texts:
                try:
                    cst.parse_module(text).code
                except Exception:  # noqa: BLE001 - a file libcst cannot parse costs what it costs
                    pass

        def ast_parse() -> None:
            for text in texts:
                try:
                    ast.parse(text)
                except SyntaxError:
                    pass

        rows = [Row("ast.parse (1 process)", in_process(ast_parse)),
                Row("libcst parse + codegen (1 process)", in_process(libcst_round_trip))]
        code = frozen_code(scratch)
        for jobs in (int(j) for j in args.jobs.split(",")):
            rows.extend(devmod_rows(corpus, jobs, scratch, code))
        if args.torchfix:
            rows.append(Row("torchfix -j 2", lambda: subprocess_run([args.torchfix, "-j", "2", str(corpus)])))
        for round_ in range(args.repeat):
            for row in rows:
                row.once()
            print(f"  round {round_ + 1}/{args.repeat} done", file=sys.stderr)

    base, base_cpu = statistics.median(rows[1].times), statistics.median(rows[1].cpu)
    print(f"\n{'measurement (medians)':38} {'wall s':>8} {'x libcst':>9} {'CPU s':>8} {'x libcst':>9} "
          f"{'RSS main':>9} {'RSS worker':>11}")
    for row in rows:
        median, cpu = statistics.median(row.times), statistics.median(row.cpu)
        main_mib, worker_mib = (f"{kb / 1024:.0f} MiB" if kb else "" for kb in row.rss)
        print(f"{row.name:38} {median:8.2f} {median / base:9.2f} {cpu:8.2f} {cpu / base_cpu:9.2f} "
              f"{main_mib:>9} {worker_mib:>11}")

    by_name = {row.name: statistics.median(row.times) for row in rows}
    by_cpu = {row.name: statistics.median(row.cpu) for row in rows}
    cold2 = by_name.get("devmod apply --check -j 2, cold")
    warm2 = by_name.get("devmod apply --check -j 2, warm")
    torchfix = by_name.get("torchfix -j 2")
    worker_peak = max((max(r.rss) for r in rows if r.rss), default=0) / 1024
    print("\ntargets (issue 9):")
    if cold2:
        cold2_cpu = by_cpu["devmod apply --check -j 2, cold"]
        print(f"  cold -j 2 / libcst round trip  = {cold2 / base:6.2f}x wall, {cold2_cpu / base_cpu:6.2f}x CPU"
              "   (target <= 1.0x)")
    if cold2 and torchfix:
        print(f"  torchfix / cold -j 2           = {torchfix / cold2:6.2f}x wall, "
              f"{by_cpu['torchfix -j 2'] / cold2_cpu:6.2f}x CPU   (target >= 10x)")
    if warm2:
        print(f"  warm -j 2                      = {warm2:6.2f} s   (target < 0.5 s)")
    print(f"  peak RSS of any process        = {worker_peak:6.0f} MiB (target < 200 MiB per worker)")

    if not args.no_scaling:  # in-process CPU seconds: the least disturbed by other load
        if args.scaling_file:
            text = args.scaling_file.read_text(encoding="utf-8")
        else:
            with tempfile.TemporaryDirectory() as tmp:
                text = make_corpus(Path(tmp), 1, 150)[0].read_text()
        results = scaling(text, repeat=args.repeat)
        print(f"\nscaling: one module ({text.count(chr(10))} lines) repeated in one file, in-process, CPU s (best of "
              f"{args.repeat})")
        print(f"{'copies':>6} {'libcst s':>9} {'x one':>6} {'devmod s':>9} {'x one':>6}")
        for count, parse, engine in results:
            print(f"{count:6} {parse:9.3f} {parse / results[0][1]:6.2f} {engine:9.3f} {engine / results[0][2]:6.2f}")
        print(f"  8 copies / one copy (devmod)   = {results[-1][2] / results[0][2]:6.2f}x   (target <= 8.5x)")


if __name__ == "__main__":
    main()
