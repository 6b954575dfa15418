"""Every example, run for real, before and after devmod rewrites it.

- after the rewrite it runs clean on the plain CPU;
- ``cpu-failure`` examples fail on the plain CPU before the rewrite (they hard-code CUDA);
  the others already run there;
- on the simulated GPU (``devmod verify``'s runner): ``device-error`` examples raise the
  device error before the rewrite, every example runs clean after it with the model's
  parameters on ``cuda:0``.

Each script runs in its own process, so no example leaks state into another. Importing
torch costs about two seconds, paid ~80 times that is too slow for two cores, so this file
starts itself once as a worker (``python tests/test_examples_run.py --worker``): the
worker imports torch, then forks one fresh child per script (``maxtasksperchild=1``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT_S = 60  # per script
# Examples without an nn.Module: no parameters to be on cuda:0.
NO_MODEL = {"09_mixed_tensors", "25_overridable_string_device_clean"}
# Examples where devmod leaves a model's group on the CPU on purpose (and reports it) beside one it moves.
PARTLY_MOVED = {"29_models_that_keep_their_data"}
CUDA_MISSING = ("Torch not compiled with CUDA enabled", "Found no NVIDIA driver", "No CUDA GPUs are available",
                "Device index must not be negative")  # a CUDA index of a CPU tensor (-1) passed as a device


# -- the worker (runs outside pytest) ----------------------------------------------------------
def _run_one(job: dict) -> dict:
    """In a fresh forked child: run one script, return what happened (JSON-able)."""
    import runpy
    import signal

    def too_slow(signum, frame):
        raise TimeoutError(f"ran longer than {TIMEOUT_S} s")

    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # the scripts' prints would mix with the worker's JSON
    os.dup2(null, 2)
    signal.signal(signal.SIGALRM, too_slow)
    signal.alarm(TIMEOUT_S)
    path = job["path"]
    if job["simulate"]:
        from dataclasses import asdict

        from codemods.verify.runner import run_script

        outcome = asdict(run_script(path, simulate=True))
        return {k: outcome[k] for k in ("kind", "message", "path", "line", "param_devices")}
    sys.argv = [path]
    sys.path.insert(0, os.path.dirname(path))
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (0, None):
            return {"kind": "error", "message": f"exited with status {exc.code}"}
    except BaseException as exc:  # the script may raise anything
        return {"kind": "error", "message": f"{type(exc).__name__}: {exc}"}
    return {"kind": "clean", "message": ""}


def _worker() -> None:
    """Read jobs (JSON on stdin), run each in a child forked from this warm process."""
    import multiprocessing

    # Imported once here and inherited by every child. The first optimizer imports
    # torch._dynamo (seconds): without it here, every child would pay that again.
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch.utils.data  # noqa: F401

    try:
        import codemods.verify.runner  # noqa: F401
        import codemods.verify.simulate  # noqa: F401
    except ImportError:
        pass  # the simulated jobs report the error themselves
    jobs = json.load(sys.stdin)
    context = multiprocessing.get_context("fork")
    with context.Pool(min(4, os.cpu_count() or 2), maxtasksperchild=1) as pool:
        pending = [pool.apply_async(_run_one, (job,)) for job in jobs]
        results = []
        for job, result in zip(jobs, pending):
            try:
                results.append(result.get(timeout=TIMEOUT_S * 2))
            except Exception as exc:  # a child that died or hung
                results.append({"kind": "error", "message": f"worker: {type(exc).__name__}: {exc}"})
    json.dump(results, sys.stdout)


# -- the tests ------------------------------------------------------------------------------------
if __name__ != "__main__":
    from examples_support import EXAMPLES, expectation, rewritten

    IDS = [p.stem for p in EXAMPLES]

    def _has_verify() -> bool:
        try:
            import codemods.verify.runner  # noqa: F401
        except ImportError:
            return False
        return True

    @pytest.fixture(scope="module")
    def outcomes(tmp_path_factory) -> dict[tuple[str, str, str], dict]:
        """(example, "before"|"after", "cpu"|"sim") -> outcome, all run in one go."""
        pytest.importorskip("torch")
        folder = tmp_path_factory.mktemp("rewritten")
        modes = ("cpu", "sim") if _has_verify() else ("cpu",)
        keys, jobs = [], []
        for example in EXAMPLES:
            after = folder / example.name
            after.write_text(rewritten(example), encoding="utf-8")
            for stage, path in (("before", example), ("after", after)):
                for mode in modes:
                    keys.append((example.stem, stage, mode))
                    jobs.append({"path": str(path), "simulate": mode == "sim"})
        proc = subprocess.run([sys.executable, __file__, "--worker"], input=json.dumps(jobs),
                              capture_output=True, text=True, timeout=600, cwd=str(folder))
        assert proc.returncode == 0, proc.stderr[-3000:]
        return dict(zip(keys, json.loads(proc.stdout)))

    @pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
    def test_rewritten_runs_on_the_cpu(example: Path, outcomes) -> None:
        outcome = outcomes[example.stem, "after", "cpu"]
        assert outcome["kind"] == "clean", outcome["message"]

    @pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
    def test_before_on_the_cpu(example: Path, outcomes) -> None:
        outcome = outcomes[example.stem, "before", "cpu"]
        if expectation(example) == "cpu-failure":
            assert outcome["kind"] == "error", "needs CUDA, so it must fail on a CPU-only machine"
            assert any(text in outcome["message"] for text in CUDA_MISSING), outcome["message"]
        else:
            assert outcome["kind"] == "clean", outcome["message"]

    @pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
    def test_before_on_the_simulated_gpu(example: Path, outcomes) -> None:
        pytest.importorskip("codemods.verify", reason="devmod verify (the simulated GPU) is not there yet")
        outcome = outcomes[example.stem, "before", "sim"]
        if expectation(example) == "device-error":
            assert outcome["kind"] == "device-error", outcome["message"] or "ran clean on the simulated GPU"
            assert outcome["path"].endswith(example.name) and outcome["line"] > 0, "report the user's line"
        else:  # device-correct, or correct wherever a GPU exists
            assert outcome["kind"] == "clean", outcome["message"]

    @pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
    def test_after_on_the_simulated_gpu(example: Path, outcomes) -> None:
        pytest.importorskip("codemods.verify", reason="devmod verify (the simulated GPU) is not there yet")
        outcome = outcomes[example.stem, "after", "sim"]
        assert outcome["kind"] == "clean", outcome["message"]
        expected = [] if example.stem in NO_MODEL else ["cpu", "cuda:0"] if example.stem in PARTLY_MOVED else ["cuda:0"]
        assert outcome["param_devices"] == expected, "the model must work on cuda:0"


if __name__ == "__main__" and sys.argv[1:] == ["--worker"]:
    _worker()
