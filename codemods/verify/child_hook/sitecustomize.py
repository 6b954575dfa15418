"""Started by every Python process a verified script launches (``subprocess.run([sys.executable,
...])``, launchers, ``multiprocessing`` with ``spawn``): ``devmod verify`` puts this folder first
on ``PYTHONPATH``, so the child inherits it through the environment.

- ``DEVMOD_SIMULATE_CUDA=1``: the simulated GPU starts the moment the child imports torch
  (never before, so children that do not use torch pay nothing).
- ``DEVMOD_CHILD_OUTCOMES=DIR``: a device error that ends the child is written to DIR as JSON,
  so the parent's report can name it.

Then the ``sitecustomize`` this one shadows (if any) runs as usual."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
_KEEP = []  # the simulation's context stays entered for the life of the child


def _devmod_import(name: str):  # noqa: ANN202
    try:
        return importlib.import_module(name)
    except ImportError:
        sys.path.append(_PACKAGE_ROOT)  # devmod run from a checkout, not installed
        return importlib.import_module(name)


def _start_simulation() -> None:
    simulate = _devmod_import("codemods.verify.simulate")
    context = simulate.simulated_cuda()
    context.__enter__()
    _KEEP.append(context)


class _AfterTorch(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps torch's loader so the simulation starts once torch is loaded."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        real_exec = spec.loader.exec_module

        def exec_module(module):  # noqa: ANN001, ANN202
            real_exec(module)
            _start_simulation()

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _record_device_errors(folder: str) -> None:
    previous = sys.excepthook

    def hook(kind, error, tb):  # noqa: ANN001, ANN202
        try:
            diagnose = _devmod_import("codemods.verify.diagnose")
            if diagnose.is_device_error(error):
                import json

                _, path, line, source = diagnose.user_frame(tb)
                record = {"argv": sys.argv, "message": f"{kind.__name__}: {error}", "path": path, "line": line,
                          "source_line": source, "devices": diagnose.devices_in(str(error))}
                with open(os.path.join(folder, f"child-{os.getpid()}.json"), "w", encoding="utf-8") as handle:
                    json.dump(record, handle)
        except Exception:  # noqa: BLE001 - the child's own traceback must still be printed
            pass
        previous(kind, error, tb)

    sys.excepthook = hook


def _chain() -> None:
    """Run the ``sitecustomize`` further down ``sys.path`` that this file hides."""
    others = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None and spec.origin != __file__:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if os.environ.get("DEVMOD_SIMULATE_CUDA") == "1":
    if "torch" in sys.modules:
        _start_simulation()
    else:
        sys.meta_path.insert(0, _AfterTorch())
if os.environ.get("DEVMOD_CHILD_OUTCOMES"):
    _record_device_errors(os.environ["DEVMOD_CHILD_OUTCOMES"])
_chain()
