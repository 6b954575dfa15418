"""Inputs that used to lose comments, crash the process or be rewritten wrongly (issue 11).

Each test names the defect it pins down; each failed on the code before the fix.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from codemods import driver
from codemods.comments import comment_tokens, lost_comments
from codemods.config import Config
from codemods.engine import SourceError, transform_source
from codemods.preflight import MAX_DEPTH
from codemods.rules.base import Rule

DEVICE = 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'


def devmod(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "codemods", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


# -- written only when a fix applied, and never without its comments -------------------------------

class ReformatsWithoutFix(Rule):
    """Stands in for an inexact libcst round trip: the text changes but nothing was fixed."""

    CODE = "DM998"
    NAME = "reformat"
    SUMMARY = "test double"

    def leave_Module(self, original_node, updated_node):
        if updated_node.footer:
            return updated_node
        self.state.changed = True
        return updated_node.with_changes(footer=[*updated_node.footer, cst.EmptyLine()])


class DropsComments(Rule):
    """A rule with a bug: its fix replaces a statement and the comment above it goes too."""

    CODE = "DM997"
    NAME = "drops-comments"
    SUMMARY = "test double"

    def leave_SimpleStatementLine(self, original_node, updated_node):
        if original_node.leading_lines and "cuda" in cst.Module([]).code_for_node(original_node):
            return self.fix(original_node, updated_node, updated_node.with_changes(leading_lines=[]), "drop")
        return updated_node


def test_no_fix_means_no_change_even_when_the_text_would_differ():
    source = "import torch\nx = 1\n"
    result = transform_source(source, rules=[ReformatsWithoutFix])
    assert result.output == source and not result.changed


def test_a_rewrite_that_drops_a_comment_is_an_error_not_a_write(tmp_path, monkeypatch):
    path = tmp_path / "a.py"
    path.write_text("import torch\n# keep me\nmodel = Net().cuda()\n")
    monkeypatch.setattr(driver, "transform_source",
                        lambda s, p="<string>", c=None, rules=None, **kw: transform_source(s, p, c, rules=[DropsComments], **kw))
    report = driver.process_file(str(path), Config(), "write")
    assert report.error and "# keep me" in report.error and not report.changed
    assert path.read_text() == "import torch\n# keep me\nmodel = Net().cuda()\n"


def test_comment_tokens_come_from_tokenize_not_from_text():
    assert comment_tokens("x = '# not a comment'  # a comment\n") == {"# a comment": 1}
    assert lost_comments("# a\n# a\nx = 1\n", "# a\nx = 1\n") == ["# a"]
    assert lost_comments("x = 1\n    # deeper at the end\n", "x = 1\n") == ["# deeper at the end"]


@pytest.mark.parametrize("tail", ["        # deeper\n", "        # deeper\n            # deeper still",
                                  "    # same\n  # less\n\n"])
def test_trailing_comments_at_the_end_of_the_file_survive_a_fix(tail):
    source = f"import torch\n\ndef f():\n    return Net().cuda()\n{tail}"
    output = transform_source(source).output
    assert ".to(device)" in output
    assert not lost_comments(source, output)


def test_comments_move_with_a_hoisted_device_definition():
    source = ("import torch\nx = torch.ones(2).to(device)\n# the device all tensors share\n"
              f"device = {DEVICE}  # pick the GPU\ny = x.to(device)\n")
    output = transform_source(source).output
    lines = output.splitlines()
    definition = lines.index(f"device = {DEVICE}  # pick the GPU")
    assert lines[definition - 1] == "# the device all tensors share"
    assert definition < lines.index("x = torch.ones(2, device=device)")


def test_comments_of_a_merged_copy_join_the_kept_definition():
    source = (f"import torch\n# first\ndevice = {DEVICE}  # one\ny = torch.ones(2).to(device)\n"
              f"# second copy\ndevice = {DEVICE}  # two\nz = y.to(device)\n")
    output = transform_source(source).output
    assert output.count("device = torch.device") == 1
    assert not lost_comments(source, output)
    kept = output.index("device = torch.device")
    assert output.index("# second copy") < kept and output.index("# two") < kept


def test_comments_of_a_function_level_copy_join_the_new_definition():
    source = (f"import torch\nmodel = Net().cuda()\ndef f():\n    # local copy\n    device = {DEVICE}  # loc\n"
              "    return torch.ones(1).to(device)\n")
    output = transform_source(source).output
    assert not lost_comments(source, output)


# -- what CPython refuses is an error; what it compiles is accepted -------------------------------

@pytest.mark.parametrize("source, reason", [
    ("import torch\ntry:\n    m = Net().cuda()\nexcept E, e:\n    pass\n", "multiple exception types"),
    ("import torch\nprint 'x', Net().cuda()\n", "cannot parse"),
    ("import torch\nx = " + "(" * 2000 + ")" * 2000 + "\n", "too many nested parentheses"),
    ("import torch\nx = torch.ones(1)" + ".cuda()" * 3000 + "\n", "nested too deeply"),
])
def test_code_cpython_refuses_is_a_clear_error(source, reason):
    with pytest.raises(SourceError) as info:
        transform_source(source)
    assert reason in info.value.message


def test_deep_but_compilable_code_is_processed():
    lists = "import torch\nx = torch.tensor(" + "[" * 150 + "]" * 150 + ").cuda()\n"
    assert "device=device" in transform_source(lists).output or ".to(device)" in transform_source(lists).output
    chain = "import torch\nx = torch.ones(1)" + ".cuda()" * 200 + "\n"
    assert ".cuda()" not in transform_source(chain).output


def test_nesting_between_what_devmod_handles_and_what_cpython_compiles_is_a_bounded_error():
    chain = "import torch\nx = torch.ones(1)" + ".cuda()" * (MAX_DEPTH // 2 + 50) + "\n"
    compile(chain, "<chain>", "exec")
    with pytest.raises(SourceError) as info:
        transform_source(chain)
    assert "nested too deeply for devmod" in info.value.message and info.value.line == 2


def test_a_file_ending_in_backslash_crlf_that_cpython_compiles_is_accepted():
    source = "import torch\r\nm = Net().cuda()\r\nx = 1 \\\r\n"
    compile(source, "<f>", "exec")
    output = transform_source(source).output
    assert output.endswith("x = 1 \\\r\n") and ".to(device)" in output


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_nesting_that_crashes_libcst_costs_one_file_with_a_clear_error(tmp_path, jobs):
    (tmp_path / "a_deep.py").write_text("import torch\nx = " + "(" * 2000 + ")" * 2000 + "\n")
    for name in "bcde":
        (tmp_path / f"{name}.py").write_text("import torch\nmodel = Net().cuda()\n")
    result = devmod("apply", "-j", jobs, str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "a_deep.py:2:" in result.stderr and "nested parentheses" in result.stderr
    assert "Traceback" not in result.stderr
    assert all(".to(device)" in (tmp_path / f"{name}.py").read_text() for name in "bcde")


# -- encodings CPython refuses ------------------------------------------------------------------

@pytest.mark.parametrize("data, reason", [
    (b"# -*- coding: utf-16 -*-\nimport torch\nm = Net().cuda()\n", "not ASCII-compatible"),
    (b"\xef\xbb\xbf# -*- coding: latin-1 -*-\nimport torch\nm = Net().cuda()\n", "byte order mark"),
])
def test_an_encoding_cpython_refuses_is_a_clear_error(tmp_path, data, reason):
    path = tmp_path / "a.py"
    path.write_bytes(data)
    report = driver.process_file(str(path), Config(), "write")
    assert report.error and reason in report.error
    assert path.read_bytes() == data
