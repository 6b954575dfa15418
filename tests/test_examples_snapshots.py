"""Each example's rewrite, stored as a reviewed unified diff in the top-level snapshots/ folder."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from codemods.driver import unified_diff
from codemods.engine import transform_source
from examples_support import EXAMPLES, ROOT, expectation, rewritten


class DiffSnapshot(SingleFileSnapshotExtension):
    """One readable ``.diff`` file per example under ``snapshots/``."""

    _write_mode = WriteMode.TEXT
    file_extension = "diff"

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(ROOT / "snapshots")


@pytest.fixture
def snapshot_diff(snapshot):
    return snapshot.use_extension(DiffSnapshot)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_diff(example: Path, snapshot_diff) -> None:
    before = example.read_text(encoding="utf-8")
    after = rewritten(example)
    cst.parse_module(after)
    assert transform_source(after, str(example)).output == after, "a second run must change nothing"
    if expectation(example) == "clean":
        assert after == before, "device-correct code must come through byte-identical"
    else:
        assert after != before, "devmod must fix this example"
    assert unified_diff(before, after, f"examples/{example.name}") == snapshot_diff
