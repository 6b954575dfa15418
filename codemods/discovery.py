"""Which files `devmod apply` looks at.

Folders are walked for ``*.py`` and ``*.ipynb``; virtual, conda, pixi and system environments, caches,
build output and whatever the ``.gitignore`` files of the walked folders and of their
parents (up to the repository root) exclude are skipped. Files named explicitly on the
command line are always taken, unless they are inside an environment: a file or folder
named explicitly in an environment is skipped too (like ruff's force-exclude, which
matters for pre-commit, which names files one by one) unless ``force_exclude`` is off.

.gitignore semantics come from ``pathspec`` (what black uses), with the linear-time RE2
engine where it is installed, so a hostile pattern such as ``*a*a*a*...b`` cannot stall
a run. Symlinked files are followed only to a target inside the paths given (and are
then written through, never replaced); an entry that cannot be stat'ed is skipped with
a warning.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Callable, Iterable, Iterator, Tuple, Union

import pathspec

SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", "build", "dist", ".venv", "venv", "env",
     ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs", "node_modules",
     "site-packages", "dist-packages", ".pixi", ".ipynb_checkpoints"}
)
# A folder holding one of these is a Python environment: venv/virtualenv, conda/mamba.
ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")

try:  # RE2 matches in linear time; Python's re backtracks exponentially on many `*`
    import re2  # noqa: F401
    _BACKEND: str | None = "re2"
except ImportError:  # pragma: no cover - google-re2 is a dependency; a platform may lack a wheel
    _BACKEND = "simple"
# Without RE2, a pattern with more wildcards than this is ignored with a warning.
MAX_WILDCARDS_WITHOUT_RE2 = 8

# An exclude glob, or (folder, glob) for a glob relative to that folder; a bare glob is
# relative to the current directory. A glob also matches a file or folder by its name.
Exclude = Union[str, Tuple[str, str]]
Warn = Callable[[str], None]


def _no_warning(message: str) -> None:
    pass


class _IgnoreFile:
    """The patterns of one .gitignore file, relative to its folder."""

    def __init__(self, base: str, spec: pathspec.GitIgnoreSpec) -> None:
        self.base, self.spec = base, spec

    @classmethod
    def load(cls, base: str, warn: Warn = _no_warning) -> "_IgnoreFile | None":
        path = os.path.join(base, ".gitignore")
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError:  # no .gitignore (the common case), or one that cannot be read
            return None
        if _BACKEND != "re2":
            for line in [line for line in lines if line.count("*") > MAX_WILDCARDS_WITHOUT_RE2]:
                warn(f"{path}: pattern {line!r} has too many wildcards to match safely; ignored")
                lines.remove(line)
        return cls(base, pathspec.GitIgnoreSpec.from_lines(lines, backend=_BACKEND))

    def decides(self, path: str, is_dir: bool) -> bool | None:
        """True: ignored, False: re-included by a `!` pattern, None: no pattern matches."""
        rel = os.path.relpath(path, self.base).replace(os.sep, "/")
        return self.spec.check_file(rel + "/" if is_dir else rel).include


def is_environment(path: str) -> bool:
    """A virtual, conda, pixi or system environment (or package folder) devmod never rewrites."""
    name = os.path.basename(os.path.normpath(path))
    return (name in ("site-packages", "dist-packages", ".pixi")
            or any(os.path.exists(os.path.join(path, marker)) for marker in ENVIRONMENT_MARKERS))


def _parent_rules(root: str, warn: Warn) -> list[_IgnoreFile]:
    """The .gitignore files above ``root`` up to the folder holding .git, outermost first:
    git applies them to ``root``'s files too, so walking a subfolder skips the same files."""
    folder = os.path.abspath(root)
    found: list[_IgnoreFile] = []
    while not os.path.exists(os.path.join(folder, ".git")):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
        rules = _IgnoreFile.load(folder, warn)
        if rules:
            found.append(rules)
    return found[::-1]


def _inside_environment(path: str) -> str | None:
    """The environment folder ``path`` is (or is inside), if any."""
    folder = os.path.abspath(path)
    while True:
        if os.path.isdir(folder) and is_environment(folder):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def iter_python_files(paths: Iterable[str], exclude: Iterable[Exclude] = (), warn: Warn | None = None,
                      force_exclude: bool = True) -> Iterator[str]:
    """Yield the Python files under ``paths`` in a stable, sorted order, each file once.

    ``warn`` receives one line per entry skipped for a reason the user should see.
    """
    warn = warn or _no_warning
    paths = list(paths)
    cwd = os.getcwd()
    excludes = tuple((os.path.abspath(e[0]), e[1]) if isinstance(e, tuple) else (cwd, e) for e in exclude)
    roots = [os.path.realpath(p) for p in paths]
    seen: set[str] = set()  # real paths: a file named twice, or also reached by a link, runs once
    environments: dict[str, str | None] = {}  # folder of a named file -> the environment it is in
    for root in paths:
        try:
            is_file = os.path.isfile(root)
        except OSError as exc:  # pragma: no cover - isfile swallows most errors
            warn(f"{root}: skipped, cannot be read ({exc.strerror or exc})")
            continue
        if is_file:
            folder = os.path.dirname(os.path.abspath(root))
            if force_exclude and folder not in environments:
                environments[folder] = _inside_environment(folder)
            if force_exclude and environments[folder]:  # pre-commit names files one by one
                warn(f"{root}: skipped, {environments[folder]} is a Python environment "
                     "(pass --no-force-exclude to rewrite it)")
                continue
            if _take(root, roots, seen, warn):
                yield root
            continue
        if force_exclude and (env := _inside_environment(root)):
            warn(f"{root}: skipped, {env} is a Python environment (pass --no-force-exclude to rewrite it)")
            continue
        yield from _walk(root, excludes, seen, _parent_rules(root, warn), roots, warn, os.path.realpath(root))


def _take(path: str, roots: list[str], seen: set[str], warn: Warn, real: str | None = None,
          link: bool | None = None) -> bool:
    """Whether to yield ``path``: once per real file, and a link only to a target the user gave.
    ``real`` and ``link``, when the caller knows them (a walk: no ``realpath`` per file)."""
    real = real or os.path.realpath(path)
    if real in seen:
        return False
    if (os.path.islink(path) if link is None else link) and not any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
        warn(f"{path}: skipped, a symlink to {real}, which is outside the paths given")
        return False
    seen.add(real)
    return True


def _excluded(path: str, excludes: tuple[tuple[str, str], ...]) -> bool:
    if not excludes:
        return False
    name = os.path.basename(path)
    full = os.path.abspath(path)
    return any(fnmatch.fnmatchcase(name, glob)
               or fnmatch.fnmatchcase(os.path.relpath(full, base).replace(os.sep, "/"), glob)
               for base, glob in excludes)


def _walk(folder: str, excludes: tuple[tuple[str, str], ...], seen: set[str], rules: list[_IgnoreFile],
          roots: list[str], warn: Warn, real_folder: str) -> Iterator[str]:
    """``real_folder``: ``os.path.realpath(folder)``; an entry that is no link is then
    ``real_folder/name``, without resolving every component again (a warm run is mostly this)."""
    own = _IgnoreFile.load(folder, warn)
    active = rules + [own] if own else rules
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        warn(f"{folder}: skipped, cannot be listed ({exc.strerror or exc})")
        return
    for entry in entries:
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = not is_dir and entry.name.endswith((".py", ".ipynb")) and entry.is_file()
        except OSError as exc:  # a self-referencing link, a vanished entry, no permission
            warn(f"{entry.path}: skipped, cannot be stat'ed ({exc.strerror or exc})")
            continue
        if _ignored(entry.path, is_dir, active) or _excluded(entry.path, excludes):
            continue
        if is_dir:
            if entry.name in SKIPPED_DIRS or entry.name.endswith(".egg-info") or is_environment(entry.path):
                continue
            # (is_dir(follow_symlinks=False): a real folder, never a link)
            yield from _walk(entry.path, excludes, seen, active, roots, warn, os.path.join(real_folder, entry.name))
        elif is_file:
            link = entry.is_symlink()
            if _take(entry.path, roots, seen, warn, None if link else os.path.join(real_folder, entry.name), link):
                yield entry.path


def _ignored(path: str, is_dir: bool, rules: list[_IgnoreFile]) -> bool:
    verdict = False
    for rule in rules:
        decided = rule.decides(path, is_dir)
        if decided is not None:
            verdict = decided
    return verdict
