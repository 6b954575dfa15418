"""Run a script as ``__main__`` on the real GPU or the simulated one and say what happened.

Also a small command (``python -m codemods.verify.runner --json [--simulate] SCRIPT``)
so ``devmod verify --compare`` can run each side in a fresh process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import runpy
import sys
import traceback
from dataclasses import asdict, dataclass, field
from typing import Iterator, Sequence

DEVICE_ERROR_PATTERNS = (
    "Expected all tensors to be on the same device",
    "Input and hidden tensors are not at the same device",
    "can't convert cuda",
    "indices should be either on cpu or on the same device",
    "module must have its parameters and buffers on device",
    "should be the same or input should be a MKLDNN tensor",
    "Input type (",
    "Torch not compiled with CUDA enabled",
    "Found no NVIDIA driver",
    "Attempting to deserialize object on a CUDA device",
    "Expected object of device type",
)
# Which devmod rule would have prevented an error, from where it happened.
HINTS = (
    ("can't convert cuda", "DM303 numpy-cpu"),
    ("deserialize object on a CUDA device", "DM302 load-map-location"),
    ("Torch not compiled with CUDA", "DM103 cuda-call / DM102 string-device"),
    ("Found no NVIDIA driver", "DM103 cuda-call / DM102 string-device"),
    ("indices should be either on cpu", "DM405 cuda-index-cpu-tensor (make the table a buffer: DM301)"),
    ("module must have its parameters", "DM202 model-to-device (move the model before wrapping)"),
)


@dataclass
class RunOutcome:
    kind: str  # "clean" | "device-error" | "error"
    mode: str  # "simulated" | "real" | "cpu"
    message: str = ""
    path: str = ""
    line: int = 0
    source_line: str = ""
    hint: str = ""
    traceback: str = ""
    param_devices: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return {"clean": 0, "device-error": 3}.get(self.kind, 1)


def is_device_error(exc: BaseException) -> bool:
    text = str(exc)
    return isinstance(exc, (RuntimeError, TypeError, AssertionError)) and any(p in text for p in DEVICE_ERROR_PATTERNS)


def hint_for(message: str, source_line: str) -> str:
    for needle, rule in HINTS:
        if needle in message:
            return rule
    if re.search(r"torch\.(zeros|ones|randn?|empty|full|arange|tensor|linspace|eye)\(", source_line):
        return "DM201 factory-device"
    if "self." in source_line or "forward" in source_line:
        return "DM201 factory-device / DM301 tensor-buffer"
    return "DM203 batch-to-device / DM202 model-to-device / DM201 factory-device"


def _user_frame(tb, script_dir: str) -> tuple[str, int, str]:
    """The innermost frame in the user's own files (not torch, not devmod, not the stdlib)."""
    devmod_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = ("", 0, "")
    for frame in traceback.extract_tb(tb):
        path = os.path.abspath(frame.filename)
        if path.startswith(devmod_dir) or "site-packages" in path or "dist-packages" in path:
            continue
        if path.startswith(script_dir) or not path.startswith(sys.prefix):
            found = (frame.filename, frame.lineno or 0, (frame.line or "").strip())
    return found


@contextlib.contextmanager
def _script_environment(path: str, argv: Sequence[str]) -> Iterator[None]:
    saved_argv, saved_path, saved_modules = sys.argv[:], sys.path[:], set(sys.modules)
    sys.argv = [path, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        yield
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        script_dir = os.path.dirname(os.path.abspath(path))
        for name in set(sys.modules) - saved_modules:
            module_file = getattr(sys.modules[name], "__file__", None) or ""
            if os.path.abspath(module_file).startswith(script_dir):
                del sys.modules[name]


def real_gpu_available() -> bool:
    import torch
    return torch.cuda.is_available()


def run_script(path: str, argv: Sequence[str] = (), simulate: bool = True) -> RunOutcome:
    """Run ``path`` in this process; the simulation is undone afterwards."""
    from .simulate import simulated_cuda

    script_dir = os.path.dirname(os.path.abspath(path))
    mode = "simulated" if simulate else ("real" if real_gpu_available() else "cpu")
    sim = None
    try:
        with _script_environment(path, argv), (simulated_cuda() if simulate else contextlib.nullcontext()) as sim:
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (0, None):
            return RunOutcome("error", mode, f"exited with status {exc.code}")
    except BaseException as exc:  # the user's script may raise anything
        file, line, source = _user_frame(exc.__traceback__, script_dir)
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        kind = "device-error" if is_device_error(exc) else "error"
        message = f"{type(exc).__name__}: {exc}"
        return RunOutcome(kind, mode, message, file, line, source,
                          hint_for(message, source) if kind == "device-error" else "", text,
                          sorted(sim.stats.param_devices) if sim else [])
    return RunOutcome("clean", mode, param_devices=sorted(sim.stats.param_devices) if sim else [])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run one script and print its outcome as JSON.")
    parser.add_argument("--simulate", action="store_true")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    outcome = run_script(options.script, options.args, simulate=options.simulate)
    sys.stdout.flush()
    print("\n" + json.dumps(asdict(outcome)))
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
