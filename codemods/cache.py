"""Per-file results remembered between runs, so an unchanged tree is answered without parsing.

A result is stored under a key made of everything that decides it: the file's bytes, its
path, devmod's version and code, and the settings that change what the rules do (not
``exclude``, which only decides which files are looked at). Change any of them and the key
changes, so a stale result can never be returned; old entries are simply never read again
and are pruned when the cache grows past its bound.

Two layers, like ruff's cache:
- ``entries/``: one small file per key (content-addressed), shared by every project;
- ``index/``: per settings and working folder, the size, mtime and content hash last seen for
  each path. A file whose size and mtime are unchanged is not even read. An outcome that
  rewrites nothing is kept in the index too, so a warm run opens one file, not one per path. A file modified
  within ``RACY_SECONDS`` of being recorded is not trusted (its mtime could repeat after an
  edit in the same clock tick) and is hashed next time, as git does for "racily clean" files.

Every write is a temporary file plus ``os.replace``: concurrent runs can race, but a reader
sees a whole old file or a whole new one, never half. A corrupt or unreadable entry is a miss.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import __version__

CACHE_FORMAT = 2
MAX_ENTRIES = 50_000  # about 50-100 MB at most; pruned oldest-first past this
RACY_SECONDS = 2.0
_ENV = "DEVMOD_CACHE_DIR"


def default_cache_dir() -> Path:
    """``$DEVMOD_CACHE_DIR``, else the platform's user cache folder (~/.cache/devmod on Linux)."""
    if os.environ.get(_ENV):
        return Path(os.environ[_ENV])
    import platformdirs  # late: only runs that use the cache pay for it
    return Path(platformdirs.user_cache_dir("devmod", appauthor=False))


@dataclass
class Outcome:
    """What the engine decided about one file's bytes: all the driver needs to report or write."""

    findings: list = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None  # "line:col: reason"
    new_data: bytes | None = None  # the rewritten bytes, when different


@dataclass
class NotebookOutcome(Outcome):
    """A notebook's: also the cell its error is in, and each changed cell's source before and
    after (0-based index), which its diff shows cell by cell."""

    error_cell: int | None = None
    cells: dict = field(default_factory=dict)


def code_fingerprint(package: str | os.PathLike | None = None) -> str:
    """Changes whenever devmod's own code does (a development install keeps its version number).

    Made from the files' bytes, not their mtimes: a checkout, merge or copy that rewrites a file
    with the same content must not throw away every cached result (a long benchmark once lost
    its warm run to a merge in the tree it measured)."""
    root = Path(package) if package is not None else Path(__file__).resolve().parent
    digest = hashlib.sha256(f"{CACHE_FORMAT}:{__version__}".encode())
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".txt") and "__pycache__" not in path.parts:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            digest.update(f"{path.relative_to(root).as_posix()}:{len(data)}:".encode())
            digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest()


def settings_fingerprint(config: Any) -> str:
    """The settings that change what the rules do; ``exclude`` and ``source`` only choose files."""
    values = dataclasses.asdict(config) if dataclasses.is_dataclass(config) else vars(config)
    relevant = sorted((k, repr(v)) for k, v in values.items() if k not in ("exclude", "source"))
    return hashlib.sha256(f"{code_fingerprint()}|{relevant!r}".encode()).hexdigest()


class Cache:
    """One run's view of the cache folder; ``close()`` writes the index back."""

    def __init__(self, config: Any, root: str | os.PathLike | None = None, max_entries: int = MAX_ENTRIES) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.settings = settings_fingerprint(config)
        self.max_entries = max_entries
        self.hits = self.misses = 0
        index_key = hashlib.sha256(f"{self.settings}|{os.getcwd()}".encode()).hexdigest()[:32]
        self._index_path = self.root / "index" / f"{index_key}.pickle"
        # path -> (size, mtime_ns, key, role extra, the outcome when it rewrites nothing, else None)
        self._index: dict[str, tuple[int, int, str, str, Outcome | None]] = self._load(self._index_path) or {}
        self._index_dirty = False
        self._written = 0
        # What the project index read from each file (see ``summary_of``), by size and mtime.
        self._summaries_path = self.root / "summaries" / f"{index_key}.pickle"
        self._summaries: dict[str, tuple[int, int, Any]] | None = None
        self._summaries_dirty = False
        self._summaries_used: set[str] = set()
        # The roles the whole project index gave, with the size and mtime of every file it read.
        self._roles_path = self.root / "roles" / f"{index_key}.pickle"

    # -- keys ------------------------------------------------------------------------------
    def key(self, path: str, data: bytes, extra: str = "") -> str:
        return self.make_key(self.settings, path, data, extra)

    @staticmethod
    def make_key(settings: str, path: str, data: bytes, extra: str = "") -> str:
        """The key of ``data`` read from ``path`` (computed where the file is read, a worker too);
        ``extra``: anything else the result depends on (what the project index says of the file)."""
        digest = hashlib.sha256(settings.encode())
        digest.update(os.path.abspath(path).encode("utf-8", "surrogateescape"))
        digest.update(b"\0")
        digest.update(extra.encode("utf-8", "surrogateescape"))
        digest.update(b"\0")
        digest.update(data)
        return digest.hexdigest()

    def known_key(self, path: str, extra: str = "") -> str | None:
        """The key of ``path`` if its size and mtime (and ``extra``) are what was recorded (the
        file is not read)."""
        known = self.known(path, extra)
        return known[0] if known is not None else None

    def known(self, path: str, extra: str = "") -> tuple[str, Outcome | None] | None:
        """``known_key``, and the outcome when the index holds it (an outcome that rewrites nothing)."""
        seen = self._index.get(os.path.abspath(path))
        if seen is None or len(seen) != 5 or seen[3] != extra:
            return None
        try:
            stat = os.stat(path)
        except OSError:
            return None
        if (stat.st_size, stat.st_mtime_ns) != seen[:2]:
            return None
        if seen[4] is not None:
            self.hits += 1
        return seen[2], seen[4]

    def likely_cold(self, paths: list[str]) -> bool:
        """Are most of ``paths`` unknown to this cache (a first run)? Only asked, never trusted."""
        known = sum(1 for path in paths if os.path.abspath(path) in self._index)
        return known * 2 < len(paths)

    # -- entries ---------------------------------------------------------------------------
    def get(self, key: str) -> Outcome | None:
        outcome = self._load(self._entry_path(key))
        if isinstance(outcome, Outcome):
            self.hits += 1
            return outcome
        self.misses += 1
        return None

    def put(self, path: str, key: str, outcome: Outcome, stat: os.stat_result | None = None,
            extra: str = "") -> None:
        """Store ``outcome``; ``stat`` (taken when the bytes were read) lets the next run skip reading."""
        self._write(self._entry_path(key), outcome)
        self._written += 1
        if stat is not None:
            self.remember(path, key, stat, extra, outcome)

    def remember(self, path: str, key: str, stat: os.stat_result | None = None, extra: str = "",
                 outcome: Outcome | None = None) -> None:
        """Record ``path``'s size and mtime for ``key``, unless it changed too recently to trust;
        and ``outcome`` with them when it rewrites nothing (a rewrite's bytes stay in its entry)."""
        if stat is None:
            try:
                stat = os.stat(path)
            except OSError:
                return
        if time.time() - stat.st_mtime_ns / 1e9 < RACY_SECONDS:
            return
        inline = outcome if outcome is not None and outcome.new_data is None else None
        self._index[os.path.abspath(path)] = (stat.st_size, stat.st_mtime_ns, key, extra, inline)
        self._index_dirty = True

    def summary_of(self, path: str, read: Callable[[str], Any] | None = None) -> Any:
        """The project index's summary of ``path`` (``read``, by default ``read_summary``), from
        the cache when the file's size and mtime are what was recorded: a warm run parses nothing."""
        from .analysis.project import read_summary  # late: a cached run may need no analysis
        read = read or read_summary
        if self._summaries is None:
            loaded = self._load(self._summaries_path)
            self._summaries = loaded if isinstance(loaded, dict) else {}
        path = os.path.abspath(path)
        self._summaries_used.add(path)
        try:
            stat = os.stat(path)
        except OSError:
            return read(path)
        seen = self._summaries.get(path)
        if seen is not None and seen[:2] == (stat.st_size, stat.st_mtime_ns):
            return seen[2]
        summary = read(path)
        if time.time() - stat.st_mtime_ns / 1e9 >= RACY_SECONDS:  # see ``remember``
            self._summaries[path] = (stat.st_size, stat.st_mtime_ns, summary)
            self._summaries_dirty = True
        return summary

    def project_roles(self, files: list[str], paths: list[str],
                      build: Callable[[], list[Any]]) -> list[tuple[Any, str]]:
        """``build()`` (each path's role and its ``role_key``), or what it gave last time when
        every file of the project index (``files``) has the size and mtime it had then: a
        warm run then neither loads the summaries nor works out who imports whom."""
        signature = hashlib.sha256(self.settings.encode())
        trusted = True
        for path in files:
            try:
                stat = os.stat(path)
            except OSError:
                trusted = False
                break
            trusted = trusted and time.time() - stat.st_mtime_ns / 1e9 >= RACY_SECONDS  # see ``remember``
            signature.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode("utf-8", "surrogateescape"))
        signature.update("\0".join(paths).encode("utf-8", "surrogateescape"))
        key = signature.hexdigest()
        seen = self._load(self._roles_path)
        if trusted and isinstance(seen, tuple) and len(seen) == 2 and seen[0] == key:
            return seen[1]
        roles = build()
        if trusted:
            self._write(self._roles_path, (key, roles))
        return roles

    def close(self) -> None:
        if self._index_dirty:
            self._write(self._index_path, self._index)
            self._index_dirty = False
        if self._summaries_dirty and self._summaries is not None:
            if len(self._summaries) > self.max_entries:  # bounded: keep what this run read
                self._summaries = {p: v for p, v in self._summaries.items() if p in self._summaries_used}
            self._write(self._summaries_path, self._summaries)
            self._summaries_dirty = False
        if self._written:
            self.prune()

    def prune(self) -> None:
        """Keep at most ``max_entries`` entries: the least recently written go first."""
        entries = self.root / "entries"
        try:
            files = [p for sub in entries.iterdir() if sub.is_dir() for p in sub.iterdir()]
        except OSError:
            return
        if len(files) <= self.max_entries:
            return
        dated = []
        for path in files:
            try:
                dated.append((path.stat().st_mtime_ns, path))
            except OSError:
                continue
        dated.sort()
        for _, path in dated[:len(dated) - self.max_entries]:
            try:
                path.unlink()
            except OSError:
                pass

    # -- files -----------------------------------------------------------------------------
    def _entry_path(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / f"{key}.pickle"

    @staticmethod
    def _load(path: Path) -> Any:
        try:
            with open(path, "rb") as handle:
                return pickle.load(handle)
        except FileNotFoundError:
            return None
        except Exception:  # a truncated or foreign file is a miss, never a crash
            return None

    @staticmethod
    def _write(path: Path, value: Any) -> None:
        import tempfile  # late: a run answered from the cache writes nothing
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
                os.replace(tmp, path)
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
        except OSError:  # a read-only or full disk costs speed, never the run
            pass
