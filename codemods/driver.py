"""Runs the engine over many files: read, transform, diff or write, in a process pool or any executor.

One bad file never stops the others; each file's outcome comes back as a FileReport.
This module imports no parser: the engine (and libcst) is imported where a file is
transformed, so a run answered from the cache, and a pool worker, load only what they use.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
import hashlib
import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Literal, Sequence

from .cache import Cache, NotebookOutcome, Outcome
from .analysis.project import FileRole, ProjectIndex, files_around, read_summary
from .config import Config
from .findings import Finding
from .interrupts import pool_options
from .source_file import decode_source, unencodable, wide_encoding_problem, write_atomic

if TYPE_CHECKING:  # the pool is imported where one is started: a cached run starts none
    from concurrent.futures import Executor, Future, ProcessPoolExecutor

Mode = Literal["write", "diff", "check"]
CHUNK_MAX = 16  # files per task: enough to hide the hand-off, few enough to balance the workers
SUMMARY_CHUNK_MAX = 32  # files per task when the workers read the project for its index


@dataclass
class FileReport:
    path: str
    changed: bool = False
    diff: str = ""
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None  # "line:col: reason"
    error_cell: int | None = None  # notebooks: the 1-based cell the error's line is in
    skipped: str | None = None

    @property
    def fix_counts(self) -> Counter:
        if not self.changed or self.error:  # counted only for files written (or that would be)
            return Counter()
        return Counter(f.code for f in self.findings if f.fixed)

    @property
    def open_findings(self) -> list[Finding]:
        return [f for f in self.findings if not f.fixed]


def __getattr__(name: str):
    """``transform_source`` and ``SourceError`` come from the engine, imported on first use;
    the process pool's classes too."""
    if name in ("transform_source", "SourceError"):
        from . import engine
        return getattr(engine, name)
    if name in ("ProcessPoolExecutor", "BrokenProcessPool"):
        import concurrent.futures.process
        return getattr(concurrent.futures.process, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def unified_diff(before: str, after: str, path: str) -> str:
    """A reviewable unified diff; line endings are normalised only for display."""
    shown = path.replace(os.sep, "/").lstrip("/")
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=_diff_name("a/" + shown), tofile=_diff_name("b/" + shown))
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines).replace("\r\n", "\n")


def _diff_name(name: str) -> str:
    """A header name as git writes it: C-quoted when it holds a newline, tab, quote or backslash,
    so a file name with a newline in it cannot forge a header line."""
    if not any(c in name for c in '"\\') and name.isprintable():
        return name
    escapes = {"\n": "\\n", "\t": "\\t", "\r": "\\r", '"': '\\"', "\\": "\\\\"}
    return '"' + "".join(escapes.get(c, c if c.isprintable() else f"\\{ord(c):03o}") for c in name) + '"'


def transform_bytes(data: bytes, path: str, config: Config, role: FileRole | None = None) -> tuple[Outcome, bool]:
    """The engine's verdict on a file's bytes, and whether it may be cached (it depends on
    nothing but its key: no internal error, which a fixed devmod should not repeat)."""
    if b"torch" not in data:
        if problem := wide_encoding_problem(data):
            return Outcome(error=f"0:0: {problem}"), True
        return Outcome(skipped="does not use torch"), True
    try:
        text = decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return Outcome(error=f"0:0: cannot decode: {exc}"), True
    this = sys.modules[__name__]  # module attributes, so tests and embedders can wrap the engine
    SourceError, transform_source = this.SourceError, this.transform_source
    try:
        result = transform_source(text.text, path, config, role=role)
    except SourceError as exc:
        return Outcome(error=f"{exc.line}:{exc.column}: {exc.message}"), "internal error" not in exc.message
    except RecursionError:
        return Outcome(error="0:0: cannot process: nesting too deep"), True
    except Exception as exc:  # a rule bug must cost one file, never the run
        return Outcome(error=(f"0:0: internal error ({type(exc).__name__}: {exc}); file left unchanged, "
                              "please report this")), False
    outcome = Outcome(findings=result.findings, skipped=result.skipped)
    if result.changed:
        try:
            new_data = text.encode(result.output)
        except UnicodeEncodeError as exc:  # e.g. a --device-name latin-1 cannot hold
            return Outcome(error=f"0:0: {unencodable(exc, text.encoding)}"), True
        if new_data != data:
            outcome.new_data = new_data
    return outcome, True


def finish(path: str, outcome: Outcome, mode: Mode, data: bytes | None = None,
           location: str | None = None, read_stat: os.stat_result | None = None) -> FileReport:
    """Turn an outcome into a report: show the diff, or write the file (``write`` mode)."""
    location = location or path
    notebook = isinstance(outcome, NotebookOutcome)
    report = FileReport(path, error=outcome.error, error_cell=outcome.error_cell if notebook else None)  # type: ignore[attr-defined]
    if outcome.error is not None:
        return report
    report.findings, report.skipped = list(outcome.findings), outcome.skipped
    if outcome.new_data is None:
        return report
    report.changed = True
    if mode == "diff" and notebook:
        from .notebooks import cells_diff

        report.diff = cells_diff(outcome.cells, path)  # type: ignore[attr-defined]
    elif mode == "diff":
        if data is None:
            data = _read(location)
        report.diff = unified_diff(decode_source(data).text, decode_source(outcome.new_data).text, path)
    elif mode == "write":
        try:
            write_atomic(location, outcome.new_data, expected=(data, read_stat) if data is not None else None)
        except OSError as exc:
            report.error = f"0:0: cannot write: {exc.strerror or exc}"
            report.changed = False
    return report


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _read_with_stat(path: str) -> tuple[bytes, os.stat_result]:
    with open(path, "rb") as handle:
        stat = os.fstat(handle.fileno())  # taken before reading: an edit after it changes the mtime
        return handle.read(), stat


def process_file(path: str, config: Config, mode: Mode, role: FileRole | None = None) -> FileReport:
    """Transform one file; in ``write`` mode replace it atomically when it changed."""
    return _work(path, config, mode, None, role=role)[0]


# What a worker sends back for one file: the report, and (key, outcome, stat) when it may be cached.
_Result = tuple[FileReport, "tuple[str, Outcome, os.stat_result] | None"]


def _work(path: str, config: Config, mode: Mode, settings: str | None, location: str | None = None,
          role: FileRole | None = None) -> _Result:
    """``path`` as the user gave it (reports, diffs); ``location`` to read it from, if elsewhere
    (an absolute path for a cluster worker, whose working folder is not ours)."""
    location = location or path
    try:
        data, stat = _read_with_stat(location)
    except OSError as exc:
        return FileReport(path, error=f"0:0: cannot read: {exc.strerror or exc}"), None
    if path.endswith(".ipynb"):  # the code cells are rewritten as one program
        from .notebooks import notebook_outcome

        outcome, cacheable = notebook_outcome(data, path, config, role)
    else:
        outcome, cacheable = transform_bytes(data, path, config, role)
    report = finish(path, outcome, mode, data, location, stat)
    stored = (Cache.make_key(settings, location, data, role_key(role)), outcome, stat) \
        if settings and cacheable else None
    return report, stored


def _work_chunk(items: Sequence[tuple[str, str, FileRole]], config: Config, mode: Mode,
                settings: str | None) -> list[_Result]:
    return [_work(path, config, mode, settings, location, role) for path, location, role in items]


def role_key(role: FileRole | None) -> str:
    """What the project index says of a file, as a stable digest (of its fields, sets sorted) for
    cache keys: a file's result depends on the rest of its project too. A digest, not the text:
    the cache's index stores one per path, and a warm run loads it whole."""
    if role is None:
        return ""
    values = dataclasses.asdict(role) if dataclasses.is_dataclass(role) else dict(vars(role))
    text = repr(sorted((k, sorted(v) if isinstance(v, (set, frozenset)) else v) for k, v in values.items()))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def process_files(paths: Iterable[str], config: Config, mode: Mode, jobs: int | None = None,
                  cache: Cache | None = None, executor: Executor | None = None) -> Iterator[FileReport]:
    """Reports in input order.

    ``cache``: answer unchanged files from it and store what is computed. ``executor``: any
    ``concurrent.futures`` executor (a Dask client's, for a cluster) instead of the default
    local process pool; its workers must see the same files and have devmod installed.
    """
    paths = list(paths)
    with contextlib.ExitStack() as stack:
        pool = None
        if executor is None and _pooled(jobs, len(paths)) and (cache is None or cache.likely_cold(paths)):
            from concurrent.futures import ProcessPoolExecutor

            # Workers are forked now, while this process is small: a forked worker starts with
            # (and its peak RSS counts) every page of its parent, and the project index below
            # holds ~60 MiB on a repository of 2,000 files. They load the engine (libcst) while
            # this process builds that index. A run the cache mostly answers forks nothing here
            # (``_run`` starts workers for the files it must still process, if enough).
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=_jobs(jobs), **pool_options()))
            pool.submit(int).result()  # (fork starts all the workers at the first task)
            for _ in range(_jobs(jobs)):
                pool.submit(_load_engine)
        yield from _process(paths, config, mode, jobs, cache, executor or pool, isolate=pool is not None)


def _load_engine() -> None:
    from . import engine  # noqa: F401  (in a worker: its first file then starts at once)


def _jobs(jobs: int | None) -> int:
    return jobs or os.cpu_count() or 1


def _pooled(jobs: int | None, count: int) -> bool:
    """Does a run of ``count`` files use a local process pool (if any file is not cached)?"""
    return _jobs(jobs) > 1 and count >= 4


def _process(paths: list[str], config: Config, mode: Mode, jobs: int | None, cache: Cache | None,
             executor: Executor | None, isolate: bool) -> Iterator[FileReport]:
    # One read of the whole project with ``ast``: which files are imported, which functions
    # are driver code, which names build models. Every file's rewrite needs it.
    files = files_around(paths)

    def build() -> list[tuple[FileRole, str]]:
        nonlocal executor
        read = read_summary
        if isolate and executor is not None:  # this run's own pool, still idle: it reads the files
            read, broken = _read_in_parallel(executor, files, _jobs(jobs))
            if broken:
                executor = None  # ``_run`` starts a fresh pool
        summary_of = functools.partial(cache.summary_of, read=read) if cache is not None else read
        project = ProjectIndex.from_paths(files, summary_of=summary_of)
        return [(role, role_key(role)) for role in map(project.role_for, paths)]
    # (the index itself is dropped here: the roles are all the rest of the run needs)
    roles, extras = zip(*(cache.project_roles(files, paths, build) if cache is not None else build())) \
        if paths else ((), ())
    reports: dict[int, FileReport] = {}
    todo: list[int] = []
    for index, path in enumerate(paths):
        report = _from_cache(cache, path, mode, extras[index]) if cache is not None else None
        if report is None:
            todo.append(index)
        else:
            reports[index] = report
    settings = cache.settings if cache is not None else None
    results = _run(paths, roles, todo, config, mode, settings, jobs, executor, isolate)
    for index in range(len(paths)):
        while index not in reports:
            done_index, (report, stored) = next(results)
            reports[done_index] = report
            if stored is not None and cache is not None:
                key, outcome, stat = stored
                cache.put(paths[done_index], key, outcome, None if report.changed and mode == "write" else stat,
                          extras[done_index])
        yield reports.pop(index)
    if cache is not None:
        cache.close()


def _read_in_parallel(executor: Executor, files: list[str], jobs: int) -> tuple[Callable[[str], Any], bool]:
    """``read_summary`` for ``files``, worked out by the pool's workers, and whether the pool broke.

    The project index needs every file's summary before any file is rewritten: read in this
    process alone, it kept the workers idle for a tenth of a run. (This process does not take a
    share: the workers are as many as the cores, and cancelling queued tasks of a pool that then
    breaks trips up CPython 3.11's pool.) A chunk a lost worker took is read here."""
    from concurrent.futures.process import BrokenProcessPool
    size = max(1, min(SUMMARY_CHUNK_MAX, len(files) // (jobs * 4)))
    chunks = [files[i:i + size] for i in range(0, len(files), size)]
    futures = [executor.submit(read_summaries, chunk) for chunk in chunks]
    read: dict[str, Any] = {}
    broken = False
    for chunk, future in zip(chunks, futures):
        try:
            read.update(zip(chunk, future.result()))
        except Exception as exc:  # noqa: BLE001 - a worker lost: this process reads the chunk itself
            broken = broken or isinstance(exc, BrokenProcessPool)
            read.update(zip(chunk, read_summaries(chunk)))
    return (lambda path: read.pop(path) if path in read else read_summary(path)), broken


def read_summaries(paths: Sequence[str]) -> list[Any]:
    """``read_summary`` of each path (a task of ``_read_in_parallel``)."""
    return [read_summary(path) for path in paths]


def _from_cache(cache: Cache, path: str, mode: Mode, extra: str) -> FileReport | None:
    """``extra``: the file's ``role_key``."""
    known = cache.known(path, extra)
    data = None
    if known is None:
        try:
            data = _read(path)
        except OSError:
            return None  # the worker reports the error
        key, outcome = cache.key(path, data, extra), None
    else:
        key, outcome = known
    if outcome is None:
        outcome = cache.get(key)
    if outcome is None:
        return None
    if data is not None:
        cache.remember(path, key, extra=extra, outcome=outcome)
    elif outcome.new_data is not None and mode != "check":
        try:  # about to show or write a change: make sure the file is what was cached
            data = _read(path)
        except OSError:
            return None
        if cache.key(path, data, extra) != key:
            return None
    return finish(path, outcome, mode, data)


def _run(paths: list[str], roles: list[FileRole], todo: list[int], config: Config, mode: Mode,
         settings: str | None, jobs: int | None, executor: Executor | None,
         isolate: bool = False) -> Iterator[tuple[int, _Result]]:
    """(index, result) for every file in ``todo``, in completion order within each batch.
    ``isolate``: ``executor`` is this run's own local pool (a crashed worker costs one file)."""
    jobs = _jobs(jobs)
    if (executor is None or isolate) and (jobs == 1 or len(todo) < 4):
        for index in todo:
            yield index, _work(paths[index], config, mode, settings, role=roles[index])
        return
    size = max(1, min(CHUNK_MAX, len(todo) // (jobs * 4)))
    chunks = [todo[i:i + size] for i in range(0, len(todo), size)]
    if executor is not None:
        yield from _run_chunks(executor, chunks, paths, roles, config, mode, settings, isolate=isolate)
        return
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=jobs, **pool_options()) as pool:  # workers stop with the run
        yield from _run_chunks(pool, chunks, paths, roles, config, mode, settings, isolate=True)


def _run_chunks(executor: Executor, chunks: list[list[int]], paths: list[str], roles: list[FileRole],
                config: Config, mode: Mode, settings: str | None, isolate: bool) -> Iterator[tuple[int, _Result]]:
    from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor

    def submit(pool: Executor, chunk: list[int]) -> Future:
        items = [(paths[i], paths[i] if isolate else os.path.abspath(paths[i]), roles[i]) for i in chunk]
        return pool.submit(_work_chunk, items, config, mode, settings)

    futures = [submit(executor, chunk) for chunk in chunks]
    replacement: ProcessPoolExecutor | None = None
    try:
        for number, chunk in enumerate(chunks):
            try:
                results = futures[number].result()
            except BrokenProcessPool:
                # A worker died (a crash in native code, the out-of-memory killer) and took the
                # pool with it: this chunk's files are retried one by one, each in a fresh worker,
                # so only the guilty file is lost; the chunks not yet done go to a new pool.
                results = [_isolated(paths[i], config, mode, settings, roles[i]) for i in chunk] if isolate else \
                    [(_lost(paths[i], "a worker process died"), None) for i in chunk]
                if isolate:
                    if replacement is not None:
                        replacement.shutdown(cancel_futures=True)
                    replacement = ProcessPoolExecutor(max_workers=getattr(executor, "_max_workers", None), **pool_options())
                    futures[number + 1:] = [submit(replacement, c) for c in chunks[number + 1:]]
            except Exception as exc:  # the executor failed the task (a cluster worker lost, ...)
                results = [(_lost(paths[i], f"{type(exc).__name__}: {exc}"), None) for i in chunk]
            for index, result in zip(chunk, results):
                yield index, result
    finally:
        if replacement is not None:
            replacement.shutdown(cancel_futures=True)


def _isolated(path: str, config: Config, mode: Mode, settings: str | None, role: FileRole) -> _Result:
    from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor
    try:
        with ProcessPoolExecutor(max_workers=1, **pool_options()) as pool:
            return pool.submit(_work, path, config, mode, settings, None, role).result()
    except BrokenProcessPool:
        return _lost(path, "the worker process died while processing this file"), None


def _lost(path: str, why: str) -> FileReport:
    return FileReport(path, error=f"0:0: internal error ({why}); file left unchanged, please report this")
