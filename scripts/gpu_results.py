"""Run every example before and after devmod's rewrite with the current Python and torch.

Made for a machine with a real GPU: `devmod apply` runs elsewhere (this script needs
only torch), so the rewritten copies are prepared first:

    python scripts/gpu_results.py prepare OUTDIR        # here: OUTDIR/before, OUTDIR/after
    python scripts/gpu_results.py run OUTDIR > GPU_RESULTS.md   # on the GPU machine
"""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEVICE_ERROR_MARKERS = ("Expected all tensors to be on the same device", "same device",
                        "Input and hidden tensors are not at the same device",
                        "can't convert cuda", "Input type (", "should be the same",
                        "indices should be either on cpu", "Expected object of device type")


def prepare(outdir: str) -> None:
    sys.path.insert(0, ROOT)
    from codemods.engine import transform_source

    before, after = os.path.join(outdir, "before"), os.path.join(outdir, "after")
    for folder in (before, after):
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
    examples = os.path.join(ROOT, "examples")
    for name in sorted(os.listdir(examples)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(examples, name), encoding="utf-8") as handle:
            source = handle.read()
        shutil.copy(os.path.join(examples, name), os.path.join(before, name))
        with open(os.path.join(after, name), "w", encoding="utf-8") as handle:
            handle.write(transform_source(source, name).output)


def _outcome(path: str) -> tuple[str, str]:
    path = os.path.abspath(path)
    proc = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300,
                          cwd=os.path.dirname(path))
    if proc.returncode == 0:
        return "clean", ""
    lines = [l for l in proc.stderr.strip().splitlines() if l.strip()]
    last = lines[-1] if lines else f"exit {proc.returncode}"
    kind = "device error" if any(m in proc.stderr for m in DEVICE_ERROR_MARKERS) else "error"
    return kind, last[:160].replace("|", "\\|")


def run(outdir: str) -> None:
    import torch

    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print("# Examples on a real GPU\n")
    print(f"- date: {datetime.date.today().isoformat()}")
    print(f"- GPU: {name}")
    print(f"- PyTorch: {torch.__version__} (CUDA {torch.version.cuda})")
    print(f"- Python: {sys.version.split()[0]}")
    print("- how: `python scripts/gpu_results.py prepare OUT` on the development machine, then "
          "`python scripts/gpu_results.py run OUT` on the GPU machine; *before* is the example as "
          "committed, *after* is `devmod apply`'s output.\n")
    print("| example | before | after | before: last line of the error |")
    print("| --- | --- | --- | --- |")
    for example in sorted(os.listdir(os.path.join(outdir, "before"))):
        before_kind, before_msg = _outcome(os.path.join(outdir, "before", example))
        after_kind, after_msg = _outcome(os.path.join(outdir, "after", example))
        after_text = after_kind if after_kind == "clean" else f"{after_kind}: {after_msg}"
        print(f"| {example} | {before_kind} | {after_text} | {before_msg} |", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "run"):
        sys.exit(__doc__)
    (prepare if sys.argv[1] == "prepare" else run)(sys.argv[2])
