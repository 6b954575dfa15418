"""Gaps found by the audit of issue 11 on 2026-11-24 (docs/reliability.md, "Audit of 2026-11-24").

Each test failed on the code before its fix: a ``--device-name`` that the file already uses
for an ordinary variable gave ``device=x``; in ``apply --interactive`` Ctrl-C at a prompt was
click's "Aborted!" with exit 1 (the ``--check`` answer), SIGTERM killed the run without a word,
a name the file's encoding cannot hold was a traceback that stopped the run, and an edit saved
while the user reviewed was overwritten, as it was for a notebook Jupyter saved mid-run.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pexpect
import pytest
from click.testing import CliRunner

from codemods import notebooks
from codemods.cli import main
from codemods.config import Config
from codemods.interactive import Session, review_files

PROMPT = r"Apply this fix \[y,n,a,d,q,\?\]\? "
NEEDS_FIX = "import torch\n\nmodel = Net().cuda()\n"


def run_apply(*args: str):
    return CliRunner().invoke(main, ["apply", "--no-cache", *args], catch_exceptions=False)


# -- --device-name already used by a variable --------------------------------------------------

@pytest.mark.parametrize("name, source, line", [
    ("x", "import torch\nx = torch.zeros(3).cuda()\n", 2),
    ("batch", "import torch\n\nmodel = Net()\nfor batch in range(3):\n    t = torch.zeros(3).cuda()\n", 4),
    ("model", "import torch\n\ndef main():\n    model = Net()\n    t = torch.zeros(3).cuda()\n", 4),
    ("out", "import torch\nwith open('f') as out:\n    t = torch.zeros(3).cuda()\n", 2),
])
def test_device_name_the_file_uses_for_a_variable_is_an_error_not_wrong_code(tmp_path, name, source, line):
    path = tmp_path / "a.py"
    path.write_text(source)
    result = run_apply("--device-name", name, str(path))
    assert result.exit_code == 2, result.output
    assert f"a.py:{line}:1: error: device name {name!r} is already a variable that is not a device" in result.stderr
    assert path.read_text() == source


@pytest.mark.parametrize("binding", ["gpu = 0", "gpu = torch.device('cuda:0')", "gpu = args.gpu_device",
                                     "gpu = 'cuda' if torch.cuda.is_available() else 'cpu'"])
def test_a_variable_that_may_hold_a_device_is_reused_not_refused(tmp_path, binding):
    path = tmp_path / "a.py"
    path.write_text(f"import torch\n{binding}\nt = torch.zeros(3).cuda()\n")
    result = run_apply("--device-name", "gpu", str(path))
    assert result.exit_code == 0, result.output
    assert "torch.zeros(3, device=gpu)" in path.read_text()


# -- apply --interactive: signals, encodings, edits meanwhile ----------------------------------

def _interactive(tmp_path: Path, *args: str) -> pexpect.spawn:
    return pexpect.spawn(sys.executable, ["-m", "codemods", "apply", "-i", "--no-cache", *args],
                         cwd=str(tmp_path), encoding="utf-8", timeout=120, dimensions=(50, 200))


def test_interactive_ctrl_c_at_a_prompt_exits_130_naming_the_files_written(tmp_path):
    (tmp_path / "a.py").write_text(NEEDS_FIX)
    (tmp_path / "b.py").write_text(NEEDS_FIX)
    child = _interactive(tmp_path, "a.py", "b.py")
    child.expect(PROMPT)
    child.send("y")  # a.py: accept its one fix
    child.expect(PROMPT)  # b.py
    child.send("\x03")  # the terminal is raw while a key is read: Ctrl-C arrives as a key
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130, child.before
    assert "interrupted by SIGINT; 1 file written" in child.before and "Aborted!" not in child.before
    assert "model = Net().to(device)" in (tmp_path / "a.py").read_text()
    assert (tmp_path / "b.py").read_text() == NEEDS_FIX


def test_interactive_sigterm_exits_130_with_the_message(tmp_path):
    (tmp_path / "a.py").write_text(NEEDS_FIX)
    child = _interactive(tmp_path, "a.py")
    child.expect(PROMPT)
    child.kill(signal.SIGTERM)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130 and child.signalstatus is None, child.before
    assert "interrupted by SIGTERM; 0 files written" in child.before
    assert (tmp_path / "a.py").read_text() == NEEDS_FIX


def test_interactive_name_the_encoding_cannot_hold_is_an_error_for_that_file(tmp_path):
    latin = tmp_path / "a.py"
    latin.write_bytes("# -*- coding: latin-1 -*-\n# caf\u00e9\nimport torch\nmodel = Net().cuda()\n"
                      .encode("latin-1"))
    before = latin.read_bytes()
    other = tmp_path / "b.py"
    other.write_text(NEEDS_FIX)
    session = Session(read_key=lambda: "a")
    reports = review_files([str(latin), str(other)], Config(device_name="\u0434\u0435\u0432"), session)
    assert "cannot encode the rewrite in the file's encoding" in (reports[0].error or "")
    assert latin.read_bytes() == before
    assert "Net().to(\u0434\u0435\u0432)" in other.read_text() and reports[1].changed


def test_interactive_edit_saved_while_the_user_reviews_is_a_conflict(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(NEEDS_FIX)

    def answer_after_the_editor_saved() -> str:
        path.write_text(NEEDS_FIX + "# typed while devmod asked\n")
        return "a"

    reports = review_files([str(path)], Config(), Session(read_key=answer_after_the_editor_saved))
    assert "conflict" in (reports[0].error or "") and not reports[0].changed
    assert path.read_text().endswith("# typed while devmod asked\n")


# -- notebooks: an autosave meanwhile ----------------------------------------------------------

def test_a_notebook_saved_while_devmod_works_is_a_conflict_not_overwritten(tmp_path, monkeypatch):
    path = tmp_path / "nb.ipynb"
    cell = {"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
            "source": ["import torch\n", "model = Net().cuda()"]}
    document = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(document, indent=1))
    original = notebooks.transform_notebook

    def autosave_meanwhile(text, file_path="<notebook>", config=None, role=None):
        result = original(text, file_path, config, role)
        path.write_text(json.dumps(dict(document, metadata={"autosaved": True}), indent=1))
        return result

    monkeypatch.setattr(notebooks, "transform_notebook", autosave_meanwhile)
    report = notebooks.process_notebook(str(path), Config(), "write")
    assert "conflict" in (report.error or "") and not report.changed
    assert json.loads(path.read_text())["metadata"] == {"autosaved": True}


# -- a file saved as UTF-16 / UTF-32 -----------------------------------------------------------

@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_a_utf16_file_that_uses_torch_is_a_clear_error_not_a_silent_skip(tmp_path, encoding):
    path = tmp_path / "a.py"
    path.write_bytes(("# -*- coding: utf-16 -*-\n" + NEEDS_FIX).encode(encoding))
    before = path.read_bytes()
    result = run_apply(str(path))
    assert result.exit_code == 2, result.output
    assert "a.py:0:0: error: cannot decode: the file is UTF-16 or UTF-32 encoded" in result.stderr
    assert path.read_bytes() == before


# -- force-exclude: a file named explicitly inside an environment (pre-commit names files) -------

def test_an_explicitly_named_file_inside_an_environment_is_skipped_unless_force_exclude_is_off(tmp_path):
    env = tmp_path / "miniconda"
    (env / "conda-meta").mkdir(parents=True)
    inside = env / "lib" / "python3.11" / "site-packages" / "pkg" / "mod.py"
    inside.parent.mkdir(parents=True)
    inside.write_text(NEEDS_FIX)
    mine = tmp_path / "train.py"
    mine.write_text(NEEDS_FIX)
    result = run_apply("--check", str(inside), str(mine))
    assert f"{inside}: skipped, " in result.stderr and "is a Python environment" in result.stderr
    assert "1 files scanned, 1 would change" in result.stderr
    result = run_apply("--check", "--no-force-exclude", str(inside), str(mine))
    assert "2 files scanned, 2 would change" in result.stderr


def test_a_bare_carriage_return_in_a_comment_splits_lines_as_cpython_does():
    """Fuzz seed 51321: ``\\r`` ends the comment ``#a`` for CPython; the file is rewritten, not refused."""
    from codemods.comments import lost_comments
    from codemods.engine import transform_source

    source = "import torch\n#a\r\x0cg\nx = torch.zeros(2).cuda()\n"
    result = transform_source(source)
    assert "#a\r" in result.output and ".cuda()" not in result.output
    assert lost_comments(source, result.output) == []
    # Still strict: a comment after the bare "\r" that is really gone is reported.
    assert lost_comments("x = 1\r# kept\n", "x = 1\r\n") == ["# kept"]
