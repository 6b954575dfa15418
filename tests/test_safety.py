"""devmod never damages a file: the safety half of the engine and `devmod apply` contract.

Each promise has its own test: a broken file is reported and left byte-identical,
encodings / BOM / line endings / modes survive a rewrite, writes are atomic, broken
rule output is never written, a second run is a no-op, files that do not use torch
are neither parsed nor opened for writing, and comments outside the fix survive.
"""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import libcst as cst
import pytest
from click.testing import CliRunner

from codemods import driver, engine
from codemods.cli import main
from codemods.config import Config
from codemods.engine import SourceError, transform_source
from codemods.rules.base import Rule

# The smallest file every default rule set rewrites: DM103 fixes `.cuda()`, DM101 adds `device`.
NEEDS_FIX = "import torch\n\nmodel = Net().cuda()\n"
FIXED_LINE = "model = Net().to(device)"


def run_apply(*args: str):
    """`devmod apply ARGS` in-process, stdout and stderr kept apart."""
    return CliRunner().invoke(main, ["apply", *args], catch_exceptions=False)


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode(encoding))
    return path


def no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if p.name.startswith(".devmod-") or p.suffix == ".tmp"]


# -- unparsable files ------------------------------------------------------------------------------

def test_unparsable_file_is_reported_left_alone_and_others_still_processed(tmp_path):
    bad = write(tmp_path / "a_bad.py", "import torch\nx = (1,\ny = 2\nz = torch.zeros(3)\n")
    good = write(tmp_path / "b_good.py", NEEDS_FIX)
    before = bad.read_bytes()
    result = run_apply(str(tmp_path))
    assert result.exit_code == 2
    assert bad.read_bytes() == before
    assert FIXED_LINE in good.read_text()
    error_lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(error_lines) == 1
    assert error_lines[0].startswith(f"{bad}:"), error_lines[0]
    line_number = int(error_lines[0][len(str(bad)) + 1:].split(":", 1)[0])
    assert line_number == 2  # CPython's line: where the unclosed bracket opens
    assert "Traceback" not in result.output


@pytest.mark.parametrize("source", [
    "import torch\nx = = 1\ny = 2\n",
    "import torch\ndef f(:\n    pass\n",
    "import torch\nclass A:\n    def f(self)\n        pass\n",
    "import torch\nif x\n    y = 1\n",
    "import torch\nx = )\n",
])
def test_parse_error_line_is_the_line_of_the_mistake(source):
    expected = None
    try:
        ast.parse(source)
    except SyntaxError as exc:
        expected = exc.lineno
    with pytest.raises(SourceError) as info:
        transform_source(source, "bad.py")
    assert info.value.line == expected


def test_undecodable_file_is_an_error_not_a_crash(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"import torch\nx = '\xff\xfe'\n")  # not UTF-8, no coding cookie
    good = write(tmp_path / "good.py", NEEDS_FIX)
    result = run_apply(str(tmp_path))
    assert result.exit_code == 2
    assert f"{bad}:" in result.stderr and "decode" in result.stderr
    assert bad.read_bytes() == b"import torch\nx = '\xff\xfe'\n"
    assert FIXED_LINE in good.read_text()


# -- bytes that must survive a rewrite ------------------------------------------------------------

def test_latin1_file_with_coding_cookie_keeps_its_encoding(tmp_path):
    text = "# -*- coding: latin-1 -*-\nimport torch\n# caf\u00e9, na\u00efve, \u00bd\nmodel = Net().cuda()\n"
    path = write(tmp_path / "latin.py", text, encoding="latin-1")
    assert run_apply(str(path)).exit_code == 0
    data = path.read_bytes()
    assert b"# caf\xe9, na\xefve, \xbd\n" in data  # still latin-1 bytes, not UTF-8
    assert data.decode("latin-1").startswith("# -*- coding: latin-1 -*-\nimport torch\n")
    assert FIXED_LINE in data.decode("latin-1")


def test_utf8_bom_is_kept(tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + "import torch\n# \u00fcber\nmodel = Net().cuda()\n".encode())
    assert run_apply(str(path)).exit_code == 0
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbfimport torch\n")
    assert data.count(b"\xef\xbb\xbf") == 1
    assert "# \u00fcber\n".encode() in data and FIXED_LINE.encode() in data


def test_crlf_line_endings_are_kept_including_inserted_lines(tmp_path):
    path = tmp_path / "crlf.py"
    path.write_bytes(b"import torch\r\n# keep me\r\nmodel = Net().cuda()\r\n")
    assert run_apply(str(path)).exit_code == 0
    data = path.read_bytes()
    assert FIXED_LINE.encode() + b"\r\n" in data
    assert b"\n" not in data.replace(b"\r\n", b"")  # every newline, new ones too, is CRLF


def test_mixed_line_endings_are_kept_line_by_line(tmp_path):
    path = tmp_path / "mixed.py"
    path.write_bytes(b"import torch\r\nx = 1\nmodel = Net().cuda()\r\ny = 2\n")
    assert run_apply(str(path)).exit_code == 0
    data = path.read_bytes()
    assert b"x = 1\n" in data and b"x = 1\r\n" not in data
    assert FIXED_LINE.encode() + b"\r\n" in data
    assert data.endswith(b"y = 2\n")


@pytest.mark.parametrize("mode", [0o755, 0o600, 0o644])
def test_file_mode_is_kept(tmp_path, mode):
    path = write(tmp_path / "script.py", NEEDS_FIX)
    path.chmod(mode)
    assert run_apply(str(path)).exit_code == 0
    assert FIXED_LINE in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_no_newline_at_end_of_file_stays_that_way(tmp_path):
    path = write(tmp_path / "a.py", NEEDS_FIX.rstrip("\n"))
    assert run_apply(str(path)).exit_code == 0
    text = path.read_text()
    assert text.endswith(FIXED_LINE)


# -- atomic writes -----------------------------------------------------------------------------------

def test_write_replaces_the_file_and_leaves_no_temp_files(tmp_path):
    path = write(tmp_path / "a.py", NEEDS_FIX)
    inode = path.stat().st_ino
    assert run_apply(str(tmp_path)).exit_code == 0
    assert FIXED_LINE in path.read_text()
    assert path.stat().st_ino != inode  # os.replace of a new file, not truncate-and-write
    assert no_temp_files(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_a_failed_write_leaves_the_original_and_no_temp_file(tmp_path, monkeypatch):
    path = write(tmp_path / "a.py", NEEDS_FIX)

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing_replace)
    report = driver.process_file(str(path), Config(), "write")
    assert report.error and "No space left" in report.error
    assert not report.changed
    assert path.read_text() == NEEDS_FIX
    assert no_temp_files(tmp_path)


# -- broken rule output is never written ----------------------------------------------------------

class _UncheckedName(cst.Name):
    """A Name that skips libcst's validation, so it can generate text that does not parse."""

    def _validate(self) -> None:
        pass

    def _visit_and_replace_children(self, visitor):  # libcst would rebuild a checked Name
        return self


class BrokenRule(Rule):
    """A rule with a bug: its fix generates code that does not parse."""

    CODE = "DM999"
    NAME = "broken"
    SUMMARY = "test double"
    TRIGGERS = (".cuda(",)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if not (isinstance(original_node.func, cst.Attribute) and original_node.func.attr.value == "cuda"):
            return updated_node
        return self.fix(original_node, updated_node, _UncheckedName("1 +"), "broken")


def test_engine_rejects_output_that_does_not_parse():
    with pytest.raises(SourceError) as info:
        transform_source(NEEDS_FIX, "a.py", rules=[BrokenRule])
    assert "does not parse" in info.value.message


def test_driver_never_writes_broken_output(tmp_path, monkeypatch):
    path = write(tmp_path / "a.py", NEEDS_FIX)
    good = write(tmp_path / "b.py", NEEDS_FIX)
    original = engine.transform_source

    def with_broken_rule(source, file_path="<string>", config=None, rules=None, role=None):
        return original(source, file_path, config, rules=[BrokenRule] if file_path == str(path) else rules, role=role)

    monkeypatch.setattr(driver, "transform_source", with_broken_rule)
    reports = list(driver.process_files([str(path), str(good)], Config(), "write", jobs=1))
    assert reports[0].error and "does not parse" in reports[0].error and not reports[0].changed
    assert path.read_text() == NEEDS_FIX
    assert FIXED_LINE in good.read_text()
    assert no_temp_files(tmp_path)


def test_cli_reports_broken_output_with_exit_2(tmp_path, monkeypatch):
    path = write(tmp_path / "a.py", NEEDS_FIX)
    original = engine.transform_source
    monkeypatch.setattr(driver, "transform_source",
                        lambda s, p="<string>", c=None, rules=None, role=None: original(s, p, c, rules=[BrokenRule], role=role))
    result = run_apply("-j", "1", str(path))
    assert result.exit_code == 2
    assert f"{path}:" in result.stderr and "does not parse" in result.stderr
    assert path.read_text() == NEEDS_FIX


# -- idempotency -------------------------------------------------------------------------------------

IDEMPOTENCY_EXAMPLES = ("01_hardcoded_cuda.py", "04_dataloader_no_move.py", "07_colab_notebook.py",
                        "13_dict_batches.py", "19_checkpoint_and_numpy.py")


def test_second_apply_changes_nothing(tmp_path):
    examples = Path(__file__).resolve().parent.parent / "examples"
    for name in IDEMPOTENCY_EXAMPLES:
        if (examples / name).exists():
            (tmp_path / name).write_bytes((examples / name).read_bytes())
    write(tmp_path / "zz_extra.py", NEEDS_FIX)
    first = run_apply("-j", "2", str(tmp_path))
    assert first.exit_code == 0, first.stderr
    assert " 0 changed" not in first.stderr
    after_first = {p.name: p.read_bytes() for p in tmp_path.glob("*.py")}
    second = run_apply("-j", "2", str(tmp_path))
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.py")} == after_first
    assert " 0 changed" in second.stderr


# -- files that do not use torch ------------------------------------------------------------------

def test_file_without_torch_is_not_parsed_or_touched(tmp_path):
    path = write(tmp_path / "plain.py", "def f(:\n    this is not python\n")
    os.utime(path, (1_000_000_000, 1_000_000_000))
    before = path.stat()
    result = run_apply(str(tmp_path))
    assert result.exit_code == 0, result.stderr
    after = path.stat()
    assert (after.st_mtime_ns, after.st_ino, after.st_size) == (before.st_mtime_ns, before.st_ino, before.st_size)


def test_file_without_torch_is_never_opened_for_writing(tmp_path, monkeypatch):
    import builtins

    path = write(tmp_path / "plain.py", "import numpy as np\nx = np.zeros(3)\n")
    opened: list[tuple[str, str]] = []
    real_open = builtins.open

    def spy(file, mode="r", *args, **kwargs):
        opened.append((str(file), mode))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy)
    report = driver.process_file(str(path), Config(), "write")
    assert report.skipped and not report.changed and not report.error
    assert all(set(mode) <= {"r", "b", "t"} for name, mode in opened if name == str(path))


def test_skip_file_comment_leaves_a_torch_file_alone(tmp_path):
    path = write(tmp_path / "a.py", "# devmod: skip-file\n" + NEEDS_FIX)
    before = path.read_bytes()
    assert run_apply(str(path)).exit_code == 0
    assert path.read_bytes() == before


# -- formatting outside the fix survives -----------------------------------------------------------

def test_comments_and_formatting_outside_the_fix_survive(tmp_path):
    source = (
        "#!/usr/bin/env python\n"
        '"""Module docstring."""\n'
        "import torch   # torch, spaced oddly\n"
        "\n"
        "\n"
        "CONFIG = {  'lr' :1e-3,\n"
        "            'epochs':  10 }   # hand-aligned\n"
        "\n"
        "# a comment before the model\n"
        "model = Net(  ).cuda()  # move it\n"
        "x=torch.ones( 2,3 )  ;  y = [1,\n"
        "  2]\n"
    )
    path = write(tmp_path / "a.py", source)
    assert run_apply(str(path)).exit_code == 0
    text = path.read_text()
    assert "model = Net(  ).to(device)  # move it\n" in text
    kept = [line for line in source.splitlines(keepends=True) if ".cuda()" not in line and "x=torch" not in line]
    for line in kept:
        assert line in text, line
    # Every original line except the ones with a fixed expression is still there, in order.
    remaining = iter(text.splitlines(keepends=True))
    assert all(line in remaining for line in kept)


class CrashingRule(Rule):
    """A rule with a worse bug: it raises."""

    CODE = "DM998"
    NAME = "crashing"
    SUMMARY = "test double"
    TRIGGERS = (".cuda(",)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        raise KeyError("rule bug")


def test_a_crashing_rule_costs_one_file_not_the_run(tmp_path, monkeypatch):
    bad = write(tmp_path / "a.py", NEEDS_FIX)
    good = write(tmp_path / "b.py", NEEDS_FIX)
    original = engine.transform_source

    def crash_on_a(source, file_path="<string>", config=None, rules=None, role=None):
        return original(source, file_path, config, rules=[CrashingRule] if file_path == str(bad) else rules,
                        role=role)

    monkeypatch.setattr(driver, "transform_source", crash_on_a)
    result = run_apply("-j", "1", str(tmp_path))
    assert result.exit_code == 2
    assert f"{bad}:" in result.stderr and "internal error" in result.stderr
    assert "Traceback" not in result.output
    assert bad.read_text() == NEEDS_FIX
    assert FIXED_LINE in good.read_text()
