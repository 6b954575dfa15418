"""Reviewing notebooks (.ipynb) the PR changes, once devmod reads notebooks (codemods.notebooks).

GitHub shows a notebook in a pull request as its JSON text and anchors comments to lines of
that text. devmod rewrites only the ``source`` strings of code cells and keeps every other
byte, so the diff between the notebook's JSON before and after is made of whole JSON lines,
and a suggestion that swaps those lines leaves a valid notebook with exactly devmod's change.
Findings, which the notebook engine reports by cell and line, are moved to the JSON line
that holds them.
"""

from __future__ import annotations

import dataclasses

from ..config import Config
from ..driver import FileReport
from .payload import FileResult
from .suggestions import line_fixes

SUFFIX = ".ipynb"


def available() -> bool:
    try:
        from .. import notebooks  # noqa: F401
    except ImportError:
        return False
    return True


def review_notebook(path: str, data: bytes, config: Config) -> tuple[FileResult, FileReport]:
    from ..notebooks import NotebookError, file_line, transform_notebook
    result, report = FileResult(path), FileReport(path)
    try:
        text = data.decode("utf-8")
        out = transform_notebook(text, path, config)
    except NotebookError as exc:
        where = f"cell {exc.cell}: " if exc.cell else ""
        result.error = report.error = f"{exc.line}:{exc.column}: {where}{exc.message}"
        return result, report
    except UnicodeDecodeError as exc:
        result.error = report.error = f"0:0: cannot decode: {exc}"
        return result, report
    except Exception as exc:  # a bug costs this notebook only
        result.error = report.error = f"0:0: internal error ({type(exc).__name__}: {exc}); please report this"
        return result, report
    report.findings, report.changed, report.skipped = out.findings, out.changed, out.skipped

    def in_file(finding, notebook_text: str):
        cell = getattr(finding, "cell", None)
        return dataclasses.replace(finding, line=file_line(notebook_text, cell, finding.line)) if cell else finding

    # Every finding points into the notebook as it was (the engine places them in its cells).
    result.fixes = line_fixes(path, text, out.output, [in_file(f, text) for f in out.findings if f.fixed])
    file_lines = text.splitlines()
    for finding in out.findings:
        if finding.fixed:
            continue
        moved = in_file(finding, text)
        line_text = file_lines[moved.line - 1] if 0 < moved.line <= len(file_lines) else ""
        result.findings.append((moved, line_text))
    return result, report


def transform_notebook_bytes(path: str, data: bytes, config: Config):
    """For the fix pull request: the notebook's new bytes and findings (None when unchanged)."""
    from ..notebooks import transform_notebook
    out = transform_notebook(data.decode("utf-8"), path, config)
    return (out.output.encode("utf-8") if out.changed else None), out.findings
