"""Runs the engine over many files: read, transform, diff or write, in a process pool.

One bad file never stops the others; each file's outcome comes back as a FileReport.
"""

from __future__ import annotations

import difflib
import os
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Literal

from .analysis.project import FileRole, ProjectIndex
from .config import Config
from .engine import SourceError, transform_source
from .rules.base import Finding
from .source_file import decode_source, write_atomic

Mode = Literal["write", "diff", "check"]


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
        return Counter(f.code for f in self.findings if f.fixed)

    @property
    def open_findings(self) -> list[Finding]:
        return [f for f in self.findings if not f.fixed]


def unified_diff(before: str, after: str, path: str) -> str:
    """A reviewable unified diff; line endings are normalised only for display."""
    shown = path.replace(os.sep, "/").lstrip("/")
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 fromfile=f"a/{shown}", tofile=f"b/{shown}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in lines).replace("\r\n", "\n")


def process_file(path: str, config: Config, mode: Mode, role: FileRole | None = None) -> FileReport:
    """Transform one file; in ``write`` mode replace it atomically when it changed."""
    if path.endswith(".ipynb"):  # the code cells are rewritten as one program
        from .notebooks import process_notebook

        return process_notebook(path, config, mode)
    report = FileReport(path)
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        report.error = f"0:0: cannot read: {exc.strerror or exc}"
        return report
    if b"torch" not in data:
        report.skipped = "does not use torch"
        return report
    try:
        text = decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        report.error = f"0:0: cannot decode: {exc}"
        return report
    try:
        result = transform_source(text.text, path, config, role=role)
    except SourceError as exc:
        report.error = f"{exc.line}:{exc.column}: {exc.message}"
        return report
    except RecursionError:
        report.error = "0:0: cannot process: nesting too deep"
        return report
    except Exception as exc:  # a rule bug must cost one file, never the run
        report.error = (f"0:0: internal error ({type(exc).__name__}: {exc}); file left unchanged, "
                        "please report this")
        return report
    report.findings, report.skipped = result.findings, result.skipped
    if not result.changed:
        return report
    new_data = text.encode(result.output)
    if new_data == data:
        return report
    report.changed = True
    if mode == "diff":
        report.diff = unified_diff(text.text, result.output, path)
    elif mode == "write":
        try:
            write_atomic(path, new_data)
        except OSError as exc:
            report.error = f"0:0: cannot write: {exc.strerror or exc}"
            report.changed = False
    return report


def _process_star(args: tuple[str, Config, Mode, FileRole | None]) -> FileReport:
    return process_file(*args)


def process_files(paths: Iterable[str], config: Config, mode: Mode, jobs: int | None = None) -> Iterator[FileReport]:
    """Reports in input order; a pool only when there is enough work to pay for it."""
    paths = list(paths)
    # One read of the whole project with ``ast``: which files are imported, which functions
    # are driver code, which names build models. Every file's rewrite needs it.
    index = ProjectIndex.around(paths)
    roles = [index.role_for(p) for p in paths]
    jobs = jobs or os.cpu_count() or 1
    if jobs == 1 or len(paths) < 4:
        for path, role in zip(paths, roles):
            yield process_file(path, config, mode, role)
        return
    chunk = max(1, min(16, len(paths) // (jobs * 4)))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        yield from pool.map(_process_star, [(p, config, mode, r) for p, r in zip(paths, roles)], chunksize=chunk)
