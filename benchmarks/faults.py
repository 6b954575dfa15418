"""Fault campaign: kill -9, Ctrl-C and SIGTERM during `devmod apply -j 2` (`python benchmarks/faults.py`).

For each signal and each of five moments of a run over --files generated files (the first
file written, then 10%, 30%, 60% and 90% of the files written), a fresh tree is rewritten
and the main process gets the signal. Afterwards:

  whole       every file is byte-identical to the original or to the full rewrite
  no temp     no temporary file (.devmod-*.tmp) is left anywhere in the tree
  no process  no devmod process (main or worker) is still running 2 s later
  exit        130 for SIGINT/SIGTERM (-9 for kill -9), never 1; the message names exactly
              the number of files written

Prints one row per run and a summary; exit status 1 if any check failed. Not a test: the
test suite runs one small case per signal (tests/test_reliability_signals.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from codemods.engine import transform_source  # noqa: E402

ORIGINAL = ("import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n\n    def forward(self, x):\n"
            "        return self.fc(x)\n\n\n# the model lives on the GPU\nmodel = Net().cuda()\n"
            "batch = torch.zeros(8, 4).cuda()  # inputs too\nout = model(batch)\n")
MOMENTS = (("first write", 0.0), ("10%", 0.10), ("30%", 0.30), ("60%", 0.60), ("90%", 0.90))
SIGNALS = (("kill -9", signal.SIGKILL), ("Ctrl-C", signal.SIGINT), ("SIGTERM", signal.SIGTERM))


def processes_on(tree: Path) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(tree) in cmdline and "codemods" in cmdline:
            found.append(int(pid))
    return found


def one_run(files: int, signum: int, fraction: float, expected: str) -> dict:
    base = Path(tempfile.mkdtemp(prefix="devmod-faults-"))
    tree = base / "tree"
    tree.mkdir()
    for i in range(files):
        (tree / f"m{i:04}.py").write_text(ORIGINAL)
    process = subprocess.Popen([sys.executable, "-m", "codemods", "apply", "-j", "2", str(tree)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    target = max(1, int(files * fraction))
    written = 0
    while process.poll() is None:
        written = sum(1 for p in tree.iterdir() if p.suffix == ".py" and p.stat().st_size != len(ORIGINAL))
        if written >= target:
            break
        time.sleep(0.02)
    finished_early = process.poll() is not None
    sent = time.monotonic()
    if not finished_early:
        process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    stop_s = time.monotonic() - sent
    time.sleep(2)
    left = processes_on(tree)
    names = sorted(p.name for p in tree.rglob("*"))
    temps = [n for n in names if not re.fullmatch(r"m\d{4}\.py", n)]
    texts = [p.read_text() for p in sorted(tree.iterdir()) if p.suffix == ".py"]
    rewritten = sum(1 for t in texts if t == expected)
    broken = sum(1 for t in texts if t not in (expected, ORIGINAL))
    message = re.search(r"interrupted by \w+; (\d+) files? written", stderr)
    exit_ok = process.returncode == (-9 if signum == signal.SIGKILL else 130)
    count_ok = signum == signal.SIGKILL or (message is not None and int(message.group(1)) == rewritten)
    for pid in left:  # never leave a stray process behind, even when the check fails
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    shutil.rmtree(base, ignore_errors=True)
    return {"rc": process.returncode, "stop_s": round(stop_s, 2), "rewritten": rewritten, "broken": broken,
            "temp_files": len(temps), "processes_left": len(left), "exit_ok": exit_ok, "count_ok": count_ok,
            "finished_before_signal": finished_early, "traceback": "Traceback" in stderr}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()
    expected = transform_source(ORIGINAL).output
    rows, failed = [], 0
    print(f"{'signal':8} {'moment':12} {'rc':>4} {'stop s':>7} {'rewritten':>9} {'broken':>6} {'temp':>5} "
          f"{'procs':>5} {'count ok':>8}")
    for signal_name, signum in SIGNALS:
        for moment, fraction in MOMENTS:
            row = one_run(args.files, signum, fraction, expected)
            row.update(signal=signal_name, moment=moment)
            rows.append(row)
            bad = row["broken"] or row["temp_files"] or row["processes_left"] or not row["exit_ok"] \
                or not row["count_ok"] or row["traceback"]
            failed += bool(bad)
            print(f"{signal_name:8} {moment:12} {row['rc']:>4} {row['stop_s']:>7} {row['rewritten']:>9} "
                  f"{row['broken']:>6} {row['temp_files']:>5} {row['processes_left']:>5} {str(row['count_ok']):>8}"
                  f"{'  FAIL' if bad else ''}", flush=True)
    print(f"{len(rows)} runs of {args.files} files, {failed} failed")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
