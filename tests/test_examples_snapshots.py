"""Each example's rewrite, stored as a reviewed unified diff: ``snapshots/<example>.diff``.

A changed rewrite fails here until someone reads the new diff and accepts it with
``pytest --snapshot-update tests/test_examples_snapshots.py``. Device-correct examples
(``# expect-before: clean``) must come through byte-identical: their diff is empty.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from codemods.driver import unified_diff
from codemods.engine import transform_source
from codemods.notebooks import cell_diff, transform_notebook
from examples_support import EXAMPLES, NOTEBOOKS, ROOT, expectation, rewritten

SNAPSHOTS = ROOT / "snapshots"
# syrupy wants snapshot names that start with the test name; ours are the example names.
pytestmark = pytest.mark.filterwarnings(r"ignore:\s*Can not relate snapshot name:UserWarning")


def _example_id(test_location) -> str:
    """The parametrize id, i.e. the example's name: ``04_dataloader_no_move``."""
    callspec = getattr(test_location.item, "callspec", None)
    return callspec.id if callspec is not None else test_location.testname


class DiffSnapshot(SingleFileSnapshotExtension):
    """One readable text file per example, named after it, in the top-level ``snapshots/``."""

    _write_mode = WriteMode.TEXT
    file_extension = "diff"

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(SNAPSHOTS)

    @classmethod
    def get_snapshot_name(cls, *, test_location, index=0) -> str:
        return _example_id(test_location)

    @classmethod
    def matches_test_location(cls, *, test_location, snapshot_location: str) -> bool:
        path = Path(snapshot_location)
        return path.parent == SNAPSHOTS and path.stem == _example_id(test_location)


@pytest.fixture
def snapshot_diff(snapshot):
    return snapshot.use_extension(DiffSnapshot)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_diff(example: Path, snapshot_diff) -> None:
    before = example.read_text(encoding="utf-8")
    after = rewritten(example)
    cst.parse_module(after)
    compile(after, example.name, "exec")
    assert transform_source(after, str(example)).output == after, "a second run must change nothing"
    if expectation(example) == "clean":
        assert after == before, "device-correct code must come through byte-identical"
    else:
        assert after != before, "devmod must fix this example"
    assert unified_diff(before, after, f"examples/{example.name}") == snapshot_diff


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_is_documented(example: Path) -> None:
    """The header says what goes wrong and what devmod does; the name is ``NN_short_name.py``."""
    assert example.stem[:3].rstrip("_").isdigit() and example.stem[2] == "_", example.name
    module = cst.parse_module(example.read_text(encoding="utf-8"))
    docstring = module.get_docstring()
    assert docstring and "devmod" in docstring, "start with a docstring: the scenario, the error, devmod's fix"
    expectation(example)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_example_diff(notebook: Path, snapshot_diff) -> None:
    """A notebook's snapshot is `devmod apply --diff` of it: one hunk group per changed cell."""
    text = notebook.read_text(encoding="utf-8")
    result = transform_notebook(text, str(notebook))
    assert result.changed, "devmod must fix this example"
    assert transform_notebook(result.output, str(notebook)).output == result.output, "a second run changes nothing"
    assert cell_diff(result, f"examples/{notebook.name}") == snapshot_diff


def test_every_example_has_a_snapshot_and_no_snapshot_is_stale() -> None:
    names = {p.stem for p in EXAMPLES + NOTEBOOKS}
    stored = {p.stem for p in SNAPSHOTS.glob("*.diff")}
    assert stored == names, f"missing: {sorted(names - stored)}, stale: {sorted(stored - names)}"
