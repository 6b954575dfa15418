"""Which files `devmod apply` looks at.

Folders are walked for ``*.py`` and ``*.ipynb``; virtual environments, caches, build output and
whatever the ``.gitignore`` files of the walked folders and of their parents (up to
the repository root) exclude are skipped. Files named explicitly on the command
line are always taken.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Tuple, Union

SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", "build", "dist", ".venv", "venv", "env",
     ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "node_modules",
     "site-packages", ".ipynb_checkpoints"}
)

# An exclude glob, or (folder, glob) for a glob relative to that folder; a bare glob is
# relative to the current directory. A glob also matches a file or folder by its name.
Exclude = Union[str, Tuple[str, str]]


@dataclass
class _IgnoreRules:
    """The patterns of one .gitignore file, relative to its folder."""

    base: str
    patterns: list[tuple[re.Pattern[str], bool, bool]] = field(default_factory=list)  # (regex, negated, dir_only)

    @classmethod
    def load(cls, base: str) -> "_IgnoreRules | None":
        path = os.path.join(base, ".gitignore")
        if not os.path.isfile(path):
            return None
        rules = cls(base)
        with open(path, encoding="utf-8", errors="replace") as handle:
            for raw in handle:
                parsed = _parse_gitignore_line(raw)
                if parsed is not None:
                    rules.patterns.append(parsed)
        return rules

    def decides(self, path: str, is_dir: bool) -> bool | None:
        rel = os.path.relpath(path, self.base).replace(os.sep, "/")
        verdict = None
        for regex, negated, dir_only in self.patterns:
            if dir_only and not is_dir:
                continue
            if regex.fullmatch(rel):
                verdict = not negated
        return verdict


def _parse_gitignore_line(raw: str) -> tuple[re.Pattern[str], bool, bool] | None:
    """One .gitignore line as (regex over the path relative to its folder, negated, dir_only)."""
    line = re.sub(r"(?<!\\) +$", "", raw.rstrip("\r\n"))  # git drops trailing spaces unless escaped
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    dir_only = line.endswith("/")
    if dir_only:
        line = line[:-1]
    if not line:
        return None
    # A slash before the end anchors the pattern to the .gitignore's folder; without one it
    # matches a name at any depth, which is what a leading `**/` means.
    line = line.lstrip("/") if "/" in line else "**/" + line
    return re.compile(_gitignore_regex(line)), negated, dir_only


def _gitignore_regex(pattern: str) -> str:
    """git's wildmatch as a regex: `*`, `?` and `[...]` never match '/', `**` spans folders."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        at_folder_start = i == 0 or pattern[i - 1] == "/"
        if pattern.startswith("**/", i) and at_folder_start:
            out.append("(?:.*/)?")  # leading `**/` or `/**/`: zero or more folders
            i += 3
        elif pattern.startswith("**", i) and i + 2 == n and at_folder_start:
            out.append(".*")  # trailing `/**`: everything inside
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "\\" and i + 1 < n:
            out.append(re.escape(pattern[i + 1]))
            i += 2
        elif char == "[" and (klass := _char_class(pattern, i)) is not None:
            regex, i = klass
            out.append(regex)
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def _char_class(pattern: str, start: int) -> tuple[str, int] | None:
    """The `[...]` at ``start`` as a regex class and the index after it; None when unclosed."""
    i = start + 1
    negate = i < len(pattern) and pattern[i] in "!^"
    i += int(negate)
    parts: list[str] = []
    while i < len(pattern):
        char = pattern[i]
        if char == "]" and parts:  # a `]` first in the class is a literal
            return "[" + ("^/" if negate else "") + "".join(parts) + "]", i + 1
        if char == "\\" and i + 1 < len(pattern):
            parts.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        parts.append(char if char == "-" else re.escape(char))
        i += 1
    return None


def _is_virtualenv(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "pyvenv.cfg"))


def _parent_rules(root: str) -> list[_IgnoreRules]:
    """The .gitignore files above ``root`` up to the folder holding .git, outermost first:
    git applies them to ``root``'s files too, so walking a subfolder skips the same files."""
    folder = os.path.abspath(root)
    found: list[_IgnoreRules] = []
    while not os.path.exists(os.path.join(folder, ".git")):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
        rules = _IgnoreRules.load(folder)
        if rules:
            found.append(rules)
    return found[::-1]


def iter_python_files(paths: Iterable[str], exclude: Iterable[Exclude] = ()) -> Iterator[str]:
    """Yield the Python files under ``paths`` in a stable, sorted order."""
    cwd = os.getcwd()
    excludes = tuple((os.path.abspath(e[0]), e[1]) if isinstance(e, tuple) else (cwd, e) for e in exclude)
    seen: set[str] = set()
    for root in paths:
        if os.path.isfile(root):
            if root not in seen:
                seen.add(root)
                yield root
            continue
        yield from _walk(root, excludes, seen, _parent_rules(root))


def _excluded(path: str, excludes: tuple[tuple[str, str], ...]) -> bool:
    if not excludes:
        return False
    name = os.path.basename(path)
    full = os.path.abspath(path)
    return any(fnmatch.fnmatchcase(name, glob)
               or fnmatch.fnmatchcase(os.path.relpath(full, base).replace(os.sep, "/"), glob)
               for base, glob in excludes)


def _walk(folder: str, excludes: tuple[tuple[str, str], ...], seen: set[str],
          rules: list[_IgnoreRules]) -> Iterator[str]:
    own = _IgnoreRules.load(folder)
    active = rules + [own] if own else rules
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        is_dir = entry.is_dir(follow_symlinks=False)
        if _ignored(entry.path, is_dir, active) or _excluded(entry.path, excludes):
            continue
        if is_dir:
            if entry.name in SKIPPED_DIRS or entry.name.endswith(".egg-info") or _is_virtualenv(entry.path):
                continue
            yield from _walk(entry.path, excludes, seen, active)
        elif entry.name.endswith((".py", ".ipynb")) and entry.is_file() and entry.path not in seen:
            seen.add(entry.path)
            yield entry.path


def _ignored(path: str, is_dir: bool, rules: list[_IgnoreRules]) -> bool:
    verdict = False
    for rule in rules:
        decided = rule.decides(path, is_dir)
        if decided is not None:
            verdict = decided
    return verdict
