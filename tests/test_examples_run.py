"""Every example, run for real: before the rewrite it fails as its header says, after the
rewrite it runs clean on the simulated GPU (model on cuda:0) and on the plain CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from codemods.verify.runner import run_script  # noqa: E402
from examples_support import EXAMPLES, expectation, rewritten  # noqa: E402

IDS = [p.stem for p in EXAMPLES]


def _rewritten_copy(example: Path, tmp_path: Path) -> Path:
    copy = tmp_path / example.name
    copy.write_text(rewritten(example), encoding="utf-8")
    return copy


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_before_fails_as_described(example: Path) -> None:
    kind = expectation(example)
    if kind == "device-error":
        outcome = run_script(str(example), simulate=True)
        assert outcome.kind == "device-error", outcome.message or "ran clean on the simulated GPU"
        assert outcome.path.endswith(example.name) and outcome.line > 0
    elif kind == "cpu-failure":
        outcome = run_script(str(example), simulate=False)
        assert outcome.kind == "device-error" and "CUDA" in outcome.message, outcome.message
    else:
        assert run_script(str(example), simulate=True).kind == "clean"


@pytest.mark.parametrize("example", EXAMPLES, ids=IDS)
def test_after_runs_clean_on_the_simulated_gpu_and_the_cpu(example: Path, tmp_path: Path) -> None:
    copy = _rewritten_copy(example, tmp_path)
    simulated = run_script(str(copy), simulate=True)
    assert simulated.kind == "clean", simulated.traceback or simulated.message
    assert "cpu" not in simulated.param_devices, "the model must work on cuda:0"
    plain = run_script(str(copy), simulate=False)
    assert plain.kind == "clean", plain.traceback or plain.message
