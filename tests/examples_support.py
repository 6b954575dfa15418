"""Shared by the example tests: the examples, their expectations, devmod's rewrite of each."""

from __future__ import annotations

import pathlib
import re
from functools import lru_cache

from codemods.engine import transform_source

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))
_EXPECT = re.compile(r"^# expect-before: (device-error|cpu-failure|cpu-only|clean)$", re.M)


def expectation(path: pathlib.Path) -> str:
    match = _EXPECT.search(path.read_text(encoding="utf-8"))
    assert match, f"{path.name} has no '# expect-before:' line"
    return match.group(1)


@lru_cache(maxsize=None)
def rewritten(path: pathlib.Path) -> str:
    return transform_source(path.read_text(encoding="utf-8"), str(path)).output
