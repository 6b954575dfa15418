"""A small fixed-seed slice of the fuzz campaign (benchmarks/fuzz.py runs it at scale).

Every generated torch program and hypothesmith module must come out of the engine
without a crash, compiling, idempotent, with all its comments, and unchanged unless a
fix was reported. The slice found the comment losses fixed in issue 11 (a collapsed
CUDA guard dropped the comment beside its `if`; deeper-indented comments at the end
of a file were dropped when the block above them was rewritten).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import fuzz  # noqa: E402

from codemods.comments import lost_comments  # noqa: E402
from codemods.engine import transform_source  # noqa: E402


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_torch_programs_pass_every_check(tmp_path, seed):
    tally = Counter(fuzz.run_programs(seed, 20, str(tmp_path)))
    assert tally["inputs"] == 20 and tally["fixed"] > 10
    assert {c: tally[c] for c in fuzz.CHECKS if tally[c]} == {}, sorted(p.name for p in tmp_path.iterdir())


def test_hypothesmith_modules_pass_every_check(tmp_path):
    # Each module as generated (nothing to fix: byte-identical) and with a .cuda() line appended
    # (the rules rewrite grammar-generated code).
    tally = Counter(fuzz.run_modules(0, 15, str(tmp_path)))
    assert tally["inputs"] > 0 and tally[fuzz.CUDA + "fixed"] > 0
    failures = {key: tally[key] for c in fuzz.CHECKS for key in (c, fuzz.CUDA + c) if tally[key]}
    assert failures == {}, sorted(p.name for p in tmp_path.iterdir())


@pytest.mark.parametrize("source", [
    "import torch\nif torch.cuda.is_available():  # beside the guard\n    model = model.cuda()\n    # below the body\n"
    "x = 1\n",
    "import torch\nif torch.cuda.is_available():\n    model = model.cuda()\n        # deeper, at the end\n",
    "import torch\ndef step(x):\n    return model(x.cuda())\ny = 1\n\n        # deeper\n            # deeper still\n",
])
def test_comments_found_by_the_fuzzer_survive(source):
    output = transform_source(source).output
    assert output != source
    assert lost_comments(source, output) == []


def _engine_that(first: bytes | None, again: bytes | None = None, fixed: bool = True, error: str | None = None):
    """A stand-in for the driver's transform_bytes with one planted defect."""
    from types import SimpleNamespace

    from codemods.cache import Outcome

    def transform(data, path, config):
        findings = [SimpleNamespace(fixed=fixed)]
        if error:
            return Outcome(error=error), False
        if data == SOURCE.encode():
            return Outcome(findings=findings, new_data=first), True
        return Outcome(findings=findings, new_data=again), True
    return transform


SOURCE = "import torch\nx = torch.zeros(2).cuda()  # keep me\n"
GOOD = b"import torch\ndevice = 1\nx = torch.zeros(2, device=device)  # keep me\n"


@pytest.mark.parametrize("engine, failure", [
    (_engine_that(GOOD), None),
    (_engine_that(b"import torch\nx = torch.zeros(2, device=device)\n"), "comments lost"),
    (_engine_that(b"import torch\nx = torch.zeros(2, device=device  # keep me\n"), "unparsable output"),
    (_engine_that(GOOD, fixed=False), "changed without fix"),
    (_engine_that(GOOD, again=GOOD + b"y = 1\n"), "non-idempotent"),
    (_engine_that(None, error="0:0: internal error in rule DM101 (KeyError: 'x')"), "crash"),
    (_engine_that(None, error="0:0: internal error: the rewrite would drop the comment '# x'"), "comments lost"),
])
def test_the_campaign_catches_each_kind_of_failure(monkeypatch, engine, failure):
    monkeypatch.setattr(fuzz, "transform_bytes", engine)
    assert fuzz.check(SOURCE)[1] == failure


def test_a_campaign_resumes_from_its_results_file(tmp_path):
    results = tmp_path / "results.jsonl"
    first, seeds = fuzz.campaign("programs", 6, 0, 3, 1, str(tmp_path), float("inf"), results, "test")
    assert first["inputs"] == 6 and seeds == [0, 1] and len(results.read_text().splitlines()) == 2
    again, seeds = fuzz.campaign("programs", 9, 0, 3, 1, str(tmp_path), float("inf"), results, "test")
    assert again["inputs"] == 9 and seeds == [0, 1, 2]  # only the third chunk ran
    assert [json.loads(line)["seed"] for line in results.read_text().splitlines()] == [0, 1, 2]
