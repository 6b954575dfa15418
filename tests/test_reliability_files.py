"""Links, owners, modes, conflicts and odd folder entries survive `devmod apply` (issue 11).

Each test failed on the code before the fix: links were replaced by copies, hard links
broken, owners and extended attributes dropped, 0444 files rewritten by root, edits made
during a run overwritten, and a self-referencing link stopped the whole run.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from codemods import driver
from codemods.cli import main
from codemods.config import Config
from codemods.discovery import iter_python_files

NEEDS_FIX = "import torch\n\nmodel = Net().cuda()\n"
FIXED_LINE = "model = Net().to(device)"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def run_apply(*args: str):
    return CliRunner().invoke(main, ["apply", *args], catch_exceptions=False)


def write(path: Path, text: str = NEEDS_FIX) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- links ----------------------------------------------------------------------------------------

def test_a_symlink_inside_the_given_paths_is_written_through_and_stays_a_link(tmp_path):
    target = write(tmp_path / "real" / "model.py")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    result = run_apply("-j", "1", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert FIXED_LINE in target.read_text()
    assert "1 changed" in result.stderr  # the file and its link are one file, processed once


def test_a_symlink_to_outside_the_given_paths_is_skipped_with_a_reason(tmp_path):
    outside = write(tmp_path / "outside" / "model.py")
    link = tmp_path / "project" / "link.py"
    link.parent.mkdir()
    link.symlink_to(outside)
    result = run_apply(str(tmp_path / "project"))
    assert result.exit_code == 0
    assert link.is_symlink() and outside.read_text() == NEEDS_FIX
    assert "link.py: skipped, a symlink to" in result.stderr and "outside the paths given" in result.stderr


def test_a_symlink_given_by_the_driver_is_written_through(tmp_path):
    target = write(tmp_path / "model.py")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    report = driver.process_file(str(link), Config(), "write")
    assert report.changed and not report.error
    assert link.is_symlink() and FIXED_LINE in target.read_text()


def test_a_hard_linked_file_is_written_in_place_so_every_name_sees_the_rewrite(tmp_path):
    path = write(tmp_path / "a.py")
    other = tmp_path / "also.py.txt"
    os.link(path, other)
    inode = path.stat().st_ino
    assert run_apply(str(path)).exit_code == 0
    assert path.stat().st_ino == inode and path.stat().st_nlink == 2
    assert FIXED_LINE in other.read_text()


# -- owner, attributes, modes -------------------------------------------------------------------------

@pytest.mark.skipif(not IS_ROOT, reason="only root can give a file away")
def test_owner_and_group_are_kept(tmp_path):
    path = write(tmp_path / "a.py")
    os.chown(path, 65534, 65534)
    path.chmod(0o4755)  # setuid: must not become setuid-root
    assert run_apply(str(path)).exit_code == 0
    info = path.stat()
    assert FIXED_LINE in path.read_text()
    assert (info.st_uid, info.st_gid) == (65534, 65534)
    assert stat.S_IMODE(info.st_mode) == 0o4755


def test_extended_attributes_are_kept(tmp_path):
    path = write(tmp_path / "a.py")
    try:
        os.setxattr(path, "user.devmod-test", b"kept")
    except (OSError, AttributeError):
        pytest.skip("no user extended attributes here")
    assert run_apply(str(path)).exit_code == 0
    assert FIXED_LINE in path.read_text()
    assert os.getxattr(path, "user.devmod-test") == b"kept"


def test_a_read_only_file_is_refused_even_for_root(tmp_path):
    path = write(tmp_path / "a.py")
    path.chmod(0o444)
    result = run_apply(str(path))
    assert result.exit_code == 2
    assert "read-only" in result.stderr and "0444" in result.stderr
    assert path.read_text() == NEEDS_FIX
    assert "0 changed, 0 fixes" in result.stderr


# -- lost update ---------------------------------------------------------------------------------------

def test_an_edit_made_while_devmod_works_is_a_conflict_not_overwritten(tmp_path, monkeypatch):
    path = write(tmp_path / "a.py")
    original = driver.transform_source

    def slow_transform(source, file_path="<string>", config=None, rules=None, **kwargs):
        result = original(source, file_path, config, rules, **kwargs)
        path.write_text(NEEDS_FIX + "# the user's edit\n")  # the editor saves mid-run
        return result

    monkeypatch.setattr(driver, "transform_source", slow_transform)
    report = driver.process_file(str(path), Config(), "write")
    assert report.error and "conflict" in report.error and not report.changed
    assert path.read_text().endswith("# the user's edit\n")
    assert not report.fix_counts  # the summary counts fixes of written files only


def test_same_size_same_second_edit_is_still_a_conflict(tmp_path, monkeypatch):
    path = write(tmp_path / "a.py")
    before = path.stat()
    original = driver.transform_source

    def edit_keeping_size_and_mtime(source, file_path="<string>", config=None, rules=None, **kwargs):
        result = original(source, file_path, config, rules, **kwargs)
        path.write_text(NEEDS_FIX.replace("Net", "Mlp"))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        return result

    monkeypatch.setattr(driver, "transform_source", edit_keeping_size_and_mtime)
    report = driver.process_file(str(path), Config(), "write")
    assert report.error and "conflict" in report.error
    assert "Mlp" in path.read_text()


# -- folders with entries that cannot be stat'ed, environments, names ---------------------------

def test_a_self_referencing_symlink_is_skipped_with_a_warning(tmp_path):
    write(tmp_path / "a.py")
    (tmp_path / "loop.py").symlink_to(tmp_path / "loop.py")
    result = run_apply(str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "loop.py: skipped, cannot be stat'ed" in result.stderr
    assert FIXED_LINE in (tmp_path / "a.py").read_text()


@pytest.mark.parametrize("marker", ["conda-meta/history", ".pixi/envs/default/x.py",
                                    "lib/python3/dist-packages/pkg/x.py"])
def test_conda_pixi_and_system_environments_are_skipped(tmp_path, marker):
    write(tmp_path / "train.py")
    write(tmp_path / "env" / marker if marker.startswith("conda") else tmp_path / marker)
    write(tmp_path / "env" / "lib" / "mod.py")
    found = [os.path.relpath(p, tmp_path) for p in iter_python_files([str(tmp_path)])]
    assert "train.py" in found
    assert not [f for f in found if f != "train.py" and not f.startswith("env/lib") or "packages" in f
                or ".pixi" in f]
    if marker.startswith("conda"):
        assert "env/lib/mod.py" not in found


def test_an_explicitly_named_environment_is_skipped_unless_force_exclude_is_off(tmp_path):
    env = tmp_path / "miniconda"
    write(env / "conda-meta" / "history")
    write(env / "lib" / "site.py")
    result = run_apply("--check", str(env))
    assert "is a Python environment" in result.stderr and "0 files scanned" in result.stderr
    result = run_apply("--check", "--no-force-exclude", str(env))
    assert "1 files scanned" in result.stderr


def test_a_path_given_twice_is_processed_once(tmp_path, monkeypatch):
    path = write(tmp_path / "a.py")
    monkeypatch.chdir(tmp_path)
    result = run_apply("--check", "a.py", "./a.py", str(path), ".")
    assert "1 files scanned" in result.stderr


def test_many_star_gitignore_pattern_is_matched_in_linear_time(tmp_path):
    (tmp_path / ".gitignore").write_text("*a" * 40 + "b\n" + "*" * 60 + "x.py\n" + "*.gen.py\n")
    write(tmp_path / ("a" * 80 + ".py"))
    write(tmp_path / "model.gen.py")
    write(tmp_path / "x.py")
    # In a subprocess: a backtracking matcher cannot be interrupted in-process, only killed.
    code = ("import os, sys; from codemods.discovery import iter_python_files; "
            "print(sorted(os.path.basename(p) for p in iter_python_files([sys.argv[1]])))")
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert time.perf_counter() - start < 30
    assert out.stdout.strip() == repr(["a" * 80 + ".py"])


# -- --device-name --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, reason", [("None", "keyword"), ("class", "keyword"), ("print", "builtin"),
                                          ("2dev", "identifier"), ("list", "builtin")])
def test_device_name_is_validated_up_front(tmp_path, name, reason):
    path = write(tmp_path / "a.py")
    result = CliRunner().invoke(main, ["apply", "--device-name", name, str(path)])
    assert result.exit_code == 2 and reason in result.output
    assert path.read_text() == NEEDS_FIX


def test_device_name_the_file_already_uses_is_an_error_for_that_file(tmp_path):
    clash = write(tmp_path / "a.py", "import torch\nimport numpy as np\n\nmodel = Net().cuda()\n")
    fine = write(tmp_path / "b.py")
    result = run_apply("--device-name", "np", str(tmp_path))
    assert result.exit_code == 2
    assert f"{clash}:2:1: error: device name 'np' is already an import of numpy" in result.stderr
    assert "np = torch.device" in fine.read_text()
    result = run_apply("--device-name", "torch", str(write(tmp_path / "c.py")))
    assert result.exit_code == 2 and "an import of torch" in result.stderr
    # Where no fix needs the name (the file already has its device), the clash is no error.
    assert run_apply("--device-name", "torch", str(fine)).exit_code == 0


def test_device_name_a_latin1_file_cannot_hold_is_an_error_for_that_file(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes("# -*- coding: latin-1 -*-\nimport torch\n# caf\u00e9\nmodel = Net().cuda()\n".encode("latin-1"))
    other = write(tmp_path / "b.py")
    before = path.read_bytes()
    result = run_apply("-j", "1", "--device-name", "\u0434\u0435\u0432", str(tmp_path))
    assert result.exit_code == 2
    assert "cannot encode the rewrite in the file's encoding" in result.stderr
    assert path.read_bytes() == before and "\u0434\u0435\u0432" in other.read_text()


# -- diff headers --------------------------------------------------------------------------------

def test_a_file_name_with_a_newline_is_quoted_in_diff_headers(tmp_path):
    path = write(tmp_path / "odd\n+++ b/evil.py")
    result = run_apply("--diff", str(path))
    headers = [line for line in result.stdout.splitlines() if line.startswith(("---", "+++"))]
    assert len(headers) == 2, result.stdout
    assert headers[0].startswith('--- "a/') and headers[0].endswith('odd\\n+++ b/evil.py"')
    assert path.read_text() == NEEDS_FIX


def test_a_method_named_like_the_device_is_not_a_conflict(tmp_path):
    path = write(tmp_path / "a.py", "import torch\n\nclass M:\n    @property\n    def device(self):\n"
                                    "        return None\n\nmodel = Net().cuda()\n")
    assert run_apply(str(path)).exit_code == 0
    assert FIXED_LINE in path.read_text()
