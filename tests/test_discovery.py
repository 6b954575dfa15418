"""Which files `devmod apply` looks at (codemods/discovery.py).

Folders are walked for ``*.py`` in sorted order, skipping .git, virtual environments
(any folder with pyvenv.cfg), __pycache__, build/, dist/ and what .gitignore excludes;
files named on the command line are always taken. .gitignore behaviour is checked
against git itself where git is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from codemods.discovery import iter_python_files

HAS_GIT = shutil.which("git") is not None


def make(root: Path, *files: str, text: str = "import torch\n") -> None:
    for name in files:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def found(root: Path, *paths: Path | str, exclude: tuple[str, ...] = ()) -> list[str]:
    targets = [str(p) for p in paths] or [str(root)]
    return [os.path.relpath(p, root).replace(os.sep, "/") for p in iter_python_files(targets, exclude)]


def git_sees(root: Path) -> list[str]:
    """The .py files git would consider (tracked or untracked, not ignored)."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    out = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard", "-z"],
                         capture_output=True, text=True, check=True).stdout
    return sorted(p for p in out.split("\0") if p.endswith(".py"))


# -- folders that are always skipped --------------------------------------------------------------

def test_walks_recursively_for_py_files_only(tmp_path):
    make(tmp_path, "a.py", "pkg/b.py", "pkg/deep/er/c.py", "notes.txt", "script.pyw", "data.py.bak", "pkg/x.pyi")
    assert found(tmp_path) == ["a.py", "pkg/b.py", "pkg/deep/er/c.py"]


@pytest.mark.parametrize("folder", [".git", "__pycache__", "build", "dist", ".venv", "venv", ".tox",
                                    "node_modules", "pkg.egg-info", ".ipynb_checkpoints"])
def test_skips_tool_folders(tmp_path, folder):
    make(tmp_path, "keep.py", f"{folder}/skip.py", f"src/{folder}/skip.py")
    assert found(tmp_path) == ["keep.py"]


def test_skips_any_virtual_environment_by_its_pyvenv_cfg(tmp_path):
    make(tmp_path, "keep.py", "my-odd-env/lib/python3.11/site.py", "nested/tools/env2/x.py")
    (tmp_path / "my-odd-env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (tmp_path / "nested" / "tools" / "env2" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert found(tmp_path) == ["keep.py"]


def test_a_folder_named_like_a_build_file_is_still_a_folder_rule_only(tmp_path):
    """Only folders are skipped by name: build.py and dist_utils.py are ordinary files."""
    make(tmp_path, "build.py", "dist_utils.py", "builder/x.py")
    assert found(tmp_path) == ["build.py", "builder/x.py", "dist_utils.py"]


# -- explicit arguments ----------------------------------------------------------------------------

def test_explicit_files_are_always_taken(tmp_path):
    make(tmp_path, "build/gen.py", "ignored.py", "__pycache__/x.py", "script")
    (tmp_path / ".gitignore").write_text("ignored.py\n")
    explicit = [tmp_path / "build" / "gen.py", tmp_path / "ignored.py", tmp_path / "__pycache__" / "x.py",
                tmp_path / "script"]
    assert found(tmp_path, *explicit) == ["build/gen.py", "ignored.py", "__pycache__/x.py", "script"]


def test_a_file_named_twice_or_inside_a_named_folder_is_taken_once(tmp_path):
    make(tmp_path, "a.py", "b.py")
    result = found(tmp_path, tmp_path / "a.py", tmp_path, tmp_path / "a.py")
    assert result == ["a.py", "b.py"]


def test_folder_without_python_files_gives_nothing(tmp_path):
    make(tmp_path, "README.md", "sub/data.csv")
    assert found(tmp_path) == []


def test_order_is_sorted_and_stable(tmp_path):
    names = ["z.py", "a.py", "M.py", "b/a.py", "a_b.py", "a/z.py", "_x.py"]
    make(tmp_path, *names)
    first = found(tmp_path)
    assert first == found(tmp_path)
    # Sorted by name within each folder, folders walked where they sort.
    assert first == ["M.py", "_x.py", "a/z.py", "a.py", "a_b.py", "b/a.py", "z.py"]


def test_exclude_globs(tmp_path):
    make(tmp_path, "a.py", "gen/b.py", "pkg/c_pb2.py", "pkg/d.py")
    assert found(tmp_path, exclude=("*_pb2.py", "gen")) == ["a.py", "pkg/d.py"]


def test_symlinked_folders_are_not_followed(tmp_path):
    make(tmp_path, "real/a.py")
    (tmp_path / "link").symlink_to(tmp_path / "real", target_is_directory=True)
    assert found(tmp_path) == ["real/a.py"]


# -- .gitignore ------------------------------------------------------------------------------------

def test_gitignore_basename_and_dir_only_patterns(tmp_path):
    make(tmp_path, "a.py", "x.gen.py", "sub/y.gen.py", "logs/l.py", "logs.py", "other/logs/z.py")
    (tmp_path / ".gitignore").write_text("# generated\n*.gen.py\n\nlogs/\n")
    assert found(tmp_path) == ["a.py", "logs.py"]


def test_gitignore_negation(tmp_path):
    make(tmp_path, "a.gen.py", "keep.gen.py", "b.py")
    (tmp_path / ".gitignore").write_text("*.gen.py\n!keep.gen.py\n")
    assert found(tmp_path) == ["b.py", "keep.gen.py"]


def test_gitignore_negation_cannot_reinclude_inside_an_ignored_folder(tmp_path):
    make(tmp_path, "out/a.py", "b.py")
    (tmp_path / ".gitignore").write_text("out/\n!out/a.py\n")
    assert found(tmp_path) == ["b.py"]


def test_gitignore_anchored_patterns(tmp_path):
    make(tmp_path, "top.py", "sub/top.py", "sub/anch.py", "deeper/sub/anch.py")
    (tmp_path / ".gitignore").write_text("/top.py\nsub/anch.py\n")
    assert found(tmp_path) == ["deeper/sub/anch.py", "sub/top.py"]


def test_nested_gitignore_applies_to_its_own_folder(tmp_path):
    make(tmp_path, "a.py", "pkg/a.py", "pkg/local.py", "local.py")
    (tmp_path / "pkg" / ".gitignore").write_text("local.py\n/a.py\n")
    assert found(tmp_path) == ["a.py", "local.py"]


def test_nested_gitignore_can_negate_a_parent_pattern(tmp_path):
    make(tmp_path, "x.gen.py", "pkg/x.gen.py")
    (tmp_path / ".gitignore").write_text("*.gen.py\n")
    (tmp_path / "pkg" / ".gitignore").write_text("!x.gen.py\n")
    assert found(tmp_path) == ["pkg/x.gen.py"]


def test_gitignore_star_does_not_cross_folders(tmp_path):
    make(tmp_path, "sub/a.py", "sub/deeper/a.py")
    (tmp_path / ".gitignore").write_text("sub/*.py\n")
    assert found(tmp_path) == ["sub/deeper/a.py"]


def test_gitignore_negated_folder_under_a_star_pattern(tmp_path):
    make(tmp_path, "docs/conf.py", "docs/api/x.py")
    (tmp_path / ".gitignore").write_text("docs/*\n!docs/api/\n")
    assert found(tmp_path) == ["docs/api/x.py"]


def test_gitignore_leading_double_star_matches_at_the_top_too(tmp_path):
    make(tmp_path, "tests/t.py", "pkg/tests/t.py", "a.py")
    (tmp_path / ".gitignore").write_text("**/tests\n")
    assert found(tmp_path) == ["a.py"]


def test_gitignore_trailing_double_star(tmp_path):
    make(tmp_path, "docs/z.py", "docs/q/z.py", "d.py")
    (tmp_path / ".gitignore").write_text("docs/**\n")
    assert found(tmp_path) == ["d.py"]


def test_gitignore_double_star_in_the_middle_matches_zero_folders(tmp_path):
    make(tmp_path, "a/b.py", "a/x/b.py", "a/x/y/b.py", "a/c.py")
    (tmp_path / ".gitignore").write_text("a/**/b.py\n")
    assert found(tmp_path) == ["a/c.py"]


def test_gitignore_escaped_hash(tmp_path):
    make(tmp_path, "#hash.py", "a.py")
    (tmp_path / ".gitignore").write_text("\\#hash.py\n")
    assert found(tmp_path) == ["a.py"]


def test_gitignore_of_a_parent_folder_applies_when_walking_a_subfolder(tmp_path):
    (tmp_path / ".git").mkdir()
    make(tmp_path, "src/gen/a.py", "src/b.py")
    (tmp_path / ".gitignore").write_text("src/gen/\n")
    assert found(tmp_path, tmp_path / "src") == ["src/b.py"]


@pytest.mark.skipif(not HAS_GIT, reason="git is not installed")
@pytest.mark.parametrize("gitignore", [
    "*.gen.py\n!keep.gen.py\nlogs/\n/top.py\nsub/anch.py\n",
    "sub/\n!sub/a.py\n",
    "*.py\n!sub/\n!sub/a.py\n",
    "deeper/\n",
    "/sub/deeper\n",
    "[ab].py\n",
    "pkg/sub\n",
    "a.py   \n",
    "docs/**\n",
])
def test_agrees_with_git(tmp_path, gitignore):
    make(tmp_path, "a.py", "b.py", "x.gen.py", "keep.gen.py", "logs/l.py", "top.py", "sub/top.py", "sub/a.py",
         "sub/anch.py", "sub/deeper/a.py", "docs/conf.py", "docs/api/x.py", "pkg/sub/gen/a.py", "logs.py")
    (tmp_path / ".gitignore").write_text(gitignore)
    ours = found(tmp_path)
    assert sorted(ours) == git_sees(tmp_path)
