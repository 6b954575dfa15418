"""Run a script as ``__main__`` on the real GPU, on the simulated one, or on the plain CPU,
and say what happened.

``run_script`` runs in this process and undoes what the run changed (``sys.argv``,
``sys.path``, the script's own modules in ``sys.modules``, the simulation). As a command,
``python -m codemods.verify.runner [--simulate] --result FILE SCRIPT [ARGS...]`` runs one
script in a fresh process and writes the outcome as JSON (``devmod verify --compare``
uses it so the two runs cannot leak state into each other).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import sys
import tempfile
import traceback
from dataclasses import asdict, dataclass, field, fields
from types import TracebackType
from typing import Any, Iterator, Sequence

from .diagnose import devices_in, diagnose, is_device_error, user_frame

EXIT_CLEAN, EXIT_ERROR, EXIT_USAGE, EXIT_DEVICE = 0, 1, 2, 3
_VERIFY_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass
class RunOutcome:
    """What one run did. ``kind``: "clean" | "device-error" | "error"; ``mode``: "simulated" |
    "real" (a CUDA GPU) | "cpu" (no GPU, no simulation)."""

    kind: str
    mode: str
    script: str = ""
    message: str = ""  # "RuntimeError: Expected all tensors ..."
    path: str = ""  # innermost frame in the user's files
    line: int = 0
    source_line: str = ""
    devices: list[str] = field(default_factory=list)  # devices the error names, GPU first
    rule: str = ""  # devmod rule that would fix it, e.g. "DM203"
    rule_name: str = ""  # e.g. "batch-to-device"
    why: str = ""
    traceback: str = ""
    param_devices: list[str] = field(default_factory=list)  # where nn.Parameters worked (simulated runs)

    @property
    def location(self) -> tuple[str, int]:
        return self.path, self.line

    @property
    def exit_code(self) -> int:
        return {"clean": EXIT_CLEAN, "device-error": EXIT_DEVICE}.get(self.kind, EXIT_ERROR)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "location": f"{self.path}:{self.line}" if self.path else "",
                "exit_code": self.exit_code}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunOutcome:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def real_gpu_available() -> bool:
    """A CUDA GPU, asked before any simulation is active."""
    import torch

    return bool(torch.cuda.is_available())


@contextlib.contextmanager
def _script_environment(argv: Sequence[str], folder: str) -> Iterator[None]:
    """``sys.argv = argv``, ``folder`` (the script's, or the working directory for
    ``-m``) first on ``sys.path``; undone on exit, with the modules the run imported from it."""
    saved_argv, saved_path, saved_modules = sys.argv[:], sys.path[:], set(sys.modules)
    sys.argv = list(argv)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        for name in set(sys.modules) - saved_modules:
            module_file = getattr(sys.modules.get(name), "__file__", None) or ""
            if module_file and os.path.abspath(module_file).startswith(folder + os.sep):
                del sys.modules[name]


def _script_traceback(exc: BaseException, script: str) -> str:
    """The traceback as the user would see it from ``python SCRIPT``: from the script's first
    frame on, without the frames of devmod's own simulation."""
    tb: TracebackType | None = exc.__traceback__
    start = tb
    while start is not None and os.path.abspath(start.tb_frame.f_code.co_filename) != script:
        start = start.tb_next
    report = traceback.TracebackException(type(exc), exc, start or tb)
    pending, seen = [report], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current.stack = traceback.StackSummary.from_list(
            [f for f in current.stack if not os.path.abspath(f.filename).startswith(_VERIFY_DIR)])
        pending.extend(c for c in (current.__cause__, current.__context__) if c is not None)
    return "".join(report.format())


def run_script(path: str | os.PathLike[str], argv: Sequence[str] = (), simulate: bool = True) -> RunOutcome:
    """Run ``path`` as ``__main__`` in this process, on the simulated ``cuda:0`` when ``simulate``
    (else on whatever the machine has), and classify the outcome."""
    script = os.path.abspath(os.fspath(path))
    if not os.path.isfile(script):
        raise FileNotFoundError(f"no such script: {path}")
    shown = os.fspath(path)
    return _run(shown, script, [shown, *argv], simulate, lambda: runpy.run_path(script, run_name="__main__"),
                os.path.dirname(script))


def run_module(name: str, argv: Sequence[str] = (), simulate: bool = True) -> RunOutcome:
    """``python -m name ARGV...`` in this process: the module runs as ``__main__``, the working
    directory is first on ``sys.path``; classified like :func:`run_script`."""
    import importlib.util

    folder = os.getcwd()
    sys.path.insert(0, folder)
    loaded = set(sys.modules)  # finding a submodule imports its package: unloaded again below
    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:  # a package: its __main__
            spec = importlib.util.find_spec(f"{name}.__main__")
    except (ImportError, ValueError) as exc:
        raise ModuleNotFoundError(f"no module named {name!r} ({exc})") from None
    finally:
        sys.path.remove(folder)
        for module in set(sys.modules) - loaded:
            if os.path.abspath(getattr(sys.modules[module], "__file__", None) or "").startswith(folder + os.sep):
                del sys.modules[module]
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        raise ModuleNotFoundError(f"no module named {name!r}")
    script = os.path.abspath(spec.origin)
    return _run(name, script, [script, *argv], simulate,
                lambda: runpy.run_module(name, run_name="__main__", alter_sys=True), folder)


def _run(shown: str, script: str, argv: Sequence[str], simulate: bool, execute: Any, folder: str) -> RunOutcome:
    from .simulate import simulated_cuda

    mode = "simulated" if simulate else ("real" if real_gpu_available() else "cpu")
    sim = None
    namespace: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="devmod-children-") as children:
        try:
            with _script_environment(argv, folder), child_environment(simulate, children):
                with (simulated_cuda() if simulate else contextlib.nullcontext()) as sim:
                    namespace = execute()
        except SystemExit as exc:
            if exc.code not in (0, None):
                outcome = RunOutcome("error", mode, shown, f"SystemExit: {exc.code}",
                                     traceback=f"exited with {exc.code}\n", param_devices=_params(sim))
                return _with_child_errors(outcome, children)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - the user's script may raise anything
            file_shown = shown if shown.endswith(".py") or os.path.isfile(shown) else os.path.relpath(script)
            return _with_child_errors(_failed(exc, mode, file_shown, script, sim, shown), children)
    return RunOutcome("clean", mode, shown, param_devices=_params(sim) if sim is not None else _models_in(namespace))


_HOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child_hook")


@contextlib.contextmanager
def child_environment(simulate: bool, children: str | None, no_bytecode: bool = True) -> Iterator[None]:
    """What child processes inherit: the startup hook (the simulation, when on, and a record of
    their device errors in ``children``), and (``no_bytecode``) no ``__pycache__`` written into
    the user's tree, here or there. Everything is restored on exit."""
    saved_env = {k: os.environ.get(k) for k in ("PYTHONPATH", "DEVMOD_SIMULATE_CUDA", "DEVMOD_CHILD_OUTCOMES",
                                                "PYTHONDONTWRITEBYTECODE")}
    saved_bytecode = sys.dont_write_bytecode
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_HOOK_DIR, saved_env["PYTHONPATH"]) if p)
    if children is not None:
        os.environ["DEVMOD_CHILD_OUTCOMES"] = children
    if no_bytecode:
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
        sys.dont_write_bytecode = True
    if simulate:
        os.environ["DEVMOD_SIMULATE_CUDA"] = "1"
    else:
        os.environ.pop("DEVMOD_SIMULATE_CUDA", None)
    try:
        yield
    finally:
        sys.dont_write_bytecode = saved_bytecode
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _with_child_errors(outcome: RunOutcome, children: str) -> RunOutcome:
    """A script that failed because a child process hit a device error has a device error."""
    if outcome.kind != "error":
        return outcome
    for name in sorted(os.listdir(children)):
        try:
            with open(os.path.join(children, name), encoding="utf-8") as handle:
                record = json.load(handle)
        except (OSError, ValueError):
            continue
        child = " ".join(record.get("argv") or []) or "a child process"
        outcome.kind = "device-error"
        outcome.traceback = f"{outcome.traceback}\nin the child process ({child}):\n{record.get('message', '')}\n"
        outcome.message = f"{record.get('message', '')} (in the child process {child})"
        outcome.path, outcome.line = _display_child_path(record.get("path") or ""), int(record.get("line") or 0)
        outcome.source_line = record.get("source_line") or ""
        outcome.devices = sorted(set(record.get("devices") or []), reverse=True)
        outcome.why = "a child process the script started hit this device error"
        return outcome
    return outcome


def _display_child_path(path: str) -> str:
    if not path:
        return ""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _params(sim: Any) -> list[str]:
    return sorted(sim.stats.param_devices) if sim is not None else []


def _models_in(namespace: dict[str, Any]) -> list[str]:
    """Without the simulation there is no record of use: where the script's module-level
    models ended up."""
    import torch

    models = [v for v in namespace.values() if isinstance(v, torch.nn.Module)]
    return sorted({_real_device(p) for m in models for p in m.parameters()})


def _failed(exc: BaseException, mode: str, shown: str, script: str, sim: Any, name: str = "") -> RunOutcome:
    _, path, line, source = user_frame(exc.__traceback__)
    path = _display_path(path, script, shown)
    message = f"{type(exc).__name__}: {exc}"
    outcome = RunOutcome("error", mode, name or shown, message, path, line, source,
                         traceback=_script_traceback(exc, script), param_devices=_params(sim))
    if is_device_error(exc):
        outcome.kind = "device-error"
        mismatch = getattr(exc, "devmod_mismatch", None)
        outcome.devices = list(mismatch.devices) if mismatch else devices_in(str(exc))
        outcome.devices = sorted(set(outcome.devices), reverse=True)
        try:
            found = diagnose(exc, sim.device_of if sim is not None else _real_device)
        except Exception:  # noqa: BLE001 - a hint must never hide the error itself
            found = None
        if found is not None:
            outcome.rule, outcome.rule_name, outcome.why = found.rule, found.rule_name, found.why
    return outcome


def _display_path(path: str, script: str, shown: str) -> str:
    """The script as the user spelled it; other files relative to the working directory."""
    if not path:
        return ""
    if os.path.abspath(path) == script:
        return shown
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _real_device(tensor: Any) -> str:
    device = tensor.device
    return "cuda:0" if device.type == "cuda" else device.type


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codemods.verify.runner",
                                     description="Run one script (or -m MODULE) and write its outcome as JSON.")
    parser.add_argument("--simulate", action="store_true", help="run on the simulated cuda:0")
    parser.add_argument("--result", required=True, help="file the JSON outcome is written to")
    parser.add_argument("-m", dest="module", help="run a module as `python -m MODULE` would")
    parser.add_argument("script", nargs="?")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    if options.module:
        if options.script is not None and options.script != "--":
            args = [options.script, *args]
        outcome = run_module(options.module, args, simulate=options.simulate)
    else:
        outcome = run_script(options.script, args, simulate=options.simulate)
    with open(options.result, "w", encoding="utf-8") as handle:
        json.dump(outcome.to_dict(), handle)
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(main())
