"""Run every example before and after devmod's rewrite with the current Python and torch.

Made for a machine with a real GPU: `devmod apply` runs elsewhere (this script needs
only torch), so the rewritten copies are prepared first:

    python scripts/gpu_results.py prepare OUTDIR        # here: OUTDIR/before, OUTDIR/after
    python scripts/gpu_results.py run OUTDIR > GPU_RESULTS.md   # on the GPU machine

Notebooks are rewritten by ``devmod apply`` like any user's notebook, then both copies become
scripts (code cells in order; shell, magic and help lines dropped), because the GPU machine has no
Jupyter kernel. The examples run side by side, one process each (``DEVMOD_GPU_JOBS``, default
one per CPU).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEVICE_ERROR_MARKERS = ("Expected all tensors to be on the same device", "same device",
                        "Input and hidden tensors are not at the same device",
                        "can't convert cuda", "Input type (", "should be the same",
                        "indices should be either on cpu", "Expected object of device type")


def _notebook_script(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        cells = json.load(handle)["cells"]
    lines: list[str] = []
    for cell in cells:
        if cell.get("cell_type") != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        # IPython-only lines: shell (!), magics (%) and help (name?) would not parse as Python.
        lines += [line for line in source.splitlines()
                  if not line.lstrip().startswith(("!", "%")) and not line.rstrip().endswith("?")]
    return "\n".join(lines) + "\n"


def prepare(outdir: str) -> None:
    sys.path.insert(0, ROOT)
    from codemods.engine import transform_source

    before, after = os.path.join(outdir, "before"), os.path.join(outdir, "after")
    for folder in (before, after):
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
    examples = os.path.join(ROOT, "examples")
    for name in sorted(os.listdir(examples)):
        source_path = os.path.join(examples, name)
        if name.endswith(".ipynb"):
            rewritten = os.path.join(outdir, name)
            shutil.copy(source_path, rewritten)
            subprocess.run([sys.executable, "-m", "codemods.cli", "apply", "--no-cache", rewritten],
                           check=False, capture_output=True, cwd=ROOT)
            script = name[: -len(".ipynb")] + ".py"
            for folder, notebook in ((before, source_path), (after, rewritten)):
                with open(os.path.join(folder, script), "w", encoding="utf-8") as handle:
                    handle.write(_notebook_script(notebook))
            os.unlink(rewritten)
            continue
        if not name.endswith(".py"):
            continue
        with open(source_path, encoding="utf-8") as handle:
            source = handle.read()
        shutil.copy(source_path, os.path.join(before, name))
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
    examples = sorted(os.listdir(os.path.join(outdir, "before")))
    paths = [os.path.join(outdir, stage, example) for example in examples for stage in ("before", "after")]
    jobs = int(os.environ.get("DEVMOD_GPU_JOBS", os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        outcomes = dict(zip(paths, pool.map(_outcome, paths)))
    for example in examples:
        before_kind, before_msg = outcomes[os.path.join(outdir, "before", example)]
        after_kind, after_msg = outcomes[os.path.join(outdir, "after", example)]
        after_text = after_kind if after_kind == "clean" else f"{after_kind}: {after_msg}"
        print(f"| {example} | {before_kind} | {after_text} | {before_msg} |", flush=True)

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "run"):
        sys.exit(__doc__)
    (prepare if sys.argv[1] == "prepare" else run)(sys.argv[2])
