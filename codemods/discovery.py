"""Which files `devmod apply` looks at.

Folders are walked for ``*.py``; virtual environments, caches, build output and
whatever the nearest ``.gitignore`` files exclude are skipped. Files named
explicitly on the command line are always taken.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator

SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", "build", "dist", ".venv", "venv", "env",
     ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "node_modules",
     "site-packages", ".ipynb_checkpoints"}
)


@dataclass
class _IgnoreRules:
    """The patterns of one .gitignore file, relative to its folder."""

    base: str
    patterns: list[tuple[str, bool, bool]] = field(default_factory=list)  # (glob, negated, dir_only)

    @classmethod
    def load(cls, base: str) -> "_IgnoreRules | None":
        path = os.path.join(base, ".gitignore")
        if not os.path.isfile(path):
            return None
        rules = cls(base)
        with open(path, encoding="utf-8", errors="replace") as handle:
            for raw in handle:
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                negated = line.startswith("!")
                line = line.lstrip("!")
                dir_only = line.endswith("/")
                rules.patterns.append((line.strip("/") if "/" in line.strip("/") else line.rstrip("/"), negated, dir_only))
        return rules

    def decides(self, path: str, is_dir: bool) -> bool | None:
        rel = os.path.relpath(path, self.base).replace(os.sep, "/")
        verdict = None
        for pattern, negated, dir_only in self.patterns:
            if dir_only and not is_dir:
                continue
            anchored = "/" in pattern
            target = rel if anchored else rel.rsplit("/", 1)[-1]
            if fnmatch.fnmatchcase(target, pattern.lstrip("/")):
                verdict = not negated
        return verdict


def _is_virtualenv(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "pyvenv.cfg"))


def iter_python_files(paths: Iterable[str], exclude: Iterable[str] = ()) -> Iterator[str]:
    """Yield the Python files under ``paths`` in a stable, sorted order."""
    excludes = tuple(exclude)
    seen: set[str] = set()
    for root in paths:
        if os.path.isfile(root):
            if root not in seen:
                seen.add(root)
                yield root
            continue
        yield from _walk(root, excludes, seen, [])


def _excluded(path: str, excludes: tuple[str, ...]) -> bool:
    norm = path.replace(os.sep, "/")
    return any(fnmatch.fnmatchcase(norm, pat) or fnmatch.fnmatchcase(os.path.basename(path), pat)
               for pat in excludes)


def _walk(folder: str, excludes: tuple[str, ...], seen: set[str],
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
        elif entry.name.endswith(".py") and entry.is_file() and entry.path not in seen:
            seen.add(entry.path)
            yield entry.path


def _ignored(path: str, is_dir: bool, rules: list[_IgnoreRules]) -> bool:
    verdict = False
    for rule in rules:
        decided = rule.decides(path, is_dir)
        if decided is not None:
            verdict = decided
    return verdict
