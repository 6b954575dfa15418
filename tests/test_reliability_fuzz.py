"""A small fixed-seed slice of the fuzz campaign (benchmarks/fuzz.py runs it at scale).

Every generated torch program and hypothesmith module must come out of the engine
without a crash, compiling, idempotent, with all its comments, and unchanged unless a
fix was reported. The slice found the comment losses fixed in issue 11 (a collapsed
CUDA guard dropped the comment beside its `if`; deeper-indented comments at the end
of a file were dropped when the block above them was rewritten).
"""

from __future__ import annotations

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
    tally = Counter(fuzz.run_modules(0, 25, str(tmp_path)))
    assert tally["inputs"] > 0
    assert {c: tally[c] for c in fuzz.CHECKS if tally[c]} == {}, sorted(p.name for p in tmp_path.iterdir())


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
