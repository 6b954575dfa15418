"""Every probe in tests/verify/probes runs on the simulated GPU with the outcome its header states.

A probe is a small program with a header::

    # expect: ok | device-error
    # rule: the PyTorch rule it follows
    # message: the exact error message (optional)
    # gpus: how many GPUs the machine needs (optional, default 1)
    # hint: text devmod's hint must contain (optional; the simulation's hint, not checked on a GPU)
    # hint-not: text devmod's hint must not contain (optional)

scripts/gpu_probes.py runs the same probes on a real GPU; where the GPU disagrees, the GPU wins.
"""

from __future__ import annotations

import pathlib

import pytest

torch = pytest.importorskip("torch")

from codemods.verify.runner import run_script  # noqa: E402

PROBES = pathlib.Path(__file__).parent / "probes"


def header(path: pathlib.Path) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(":")
        fields[key.strip()] = value.strip()
    return fields


ALL = sorted(PROBES.glob("*.py"))


def test_every_probe_states_its_outcome_and_rule():
    assert len(ALL) >= 40
    for path in ALL:
        fields = header(path)
        assert fields.get("expect") in ("ok", "device-error"), path.name
        assert fields.get("rule"), path.name


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_probe_outcome_on_the_simulated_gpu(path, monkeypatch):
    fields = header(path)
    monkeypatch.setenv("DEVMOD_SIMULATED_GPUS", fields.get("gpus", "1"))
    outcome = run_script(str(path), simulate=True)
    expected = {"ok": "clean", "device-error": "device-error"}[fields["expect"]]
    assert outcome.kind == expected, (fields["rule"], outcome.message, outcome.traceback[-1500:])
    if "message" in fields:
        assert outcome.message.split(": ", 1)[1] == fields["message"], fields["rule"]
    if "hint" in fields:
        assert fields["hint"] in outcome.why, (fields["rule"], outcome.why)
    if "hint-not" in fields:
        assert fields["hint-not"] not in outcome.why, (fields["rule"], outcome.why)
    if expected == "device-error" and "child" not in path.stem:
        assert outcome.path == str(path), (outcome.path, outcome.line)  # reported at the probe's own line
