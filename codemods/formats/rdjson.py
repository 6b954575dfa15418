"""`--format rdjson`: reviewdog's Diagnostic Format (the DiagnosticResult message, as JSON).

Teams on GitLab, Bitbucket or Gerrit post devmod's fixes through reviewdog
(`devmod apply --format rdjson . | reviewdog -f=rdjson -reporter=...`). Each fix is one
diagnostic carrying a suggestion that replaces exactly the lines it changes; each finding
devmod does not fix is a diagnostic without one. Positions follow the format: lines and
columns from 1, columns counted in UTF-8 bytes, range ends exclusive.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Iterable

from ..driver import FileReport
from ..review.suggestions import RULES_DOC_URL, LineFix, line_fixes, rule_error, rule_link, \
    why_sentence
from ..source_file import decode_source

SOURCE = {"name": "devmod", "url": "https://github.com/devmod/devmod"}
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def rdjson_document(reports: Iterable[FileReport], docs_url: str = RULES_DOC_URL) -> dict:
    """The DiagnosticResult for ``reports`` made in diff mode (their files are still unchanged on disk)."""
    diagnostics: list[dict] = []
    for report in reports:
        if report.error:
            continue
        if report.path.endswith(".ipynb"):
            diagnostics.extend(_notebook_diagnostics(report, docs_url))
            continue
        before = after = None
        if report.diff:
            with open(report.path, "rb") as handle:
                before = decode_source(handle.read()).text.replace("\r\n", "\n")
            after = apply_unified_diff(before, report.diff)
            for fix in line_fixes(report.path, before, after, report.findings):
                diagnostics.append(_fix_diagnostic(fix, docs_url))
        for finding in report.open_findings:  # (placed at the user's lines by the engine)
            diagnostics.append(_finding_diagnostic(report.path, finding, docs_url))
    return {"source": SOURCE, "severity": "WARNING", "diagnostics": diagnostics}


def _notebook_diagnostics(report: FileReport, docs_url: str) -> list[dict]:
    """A notebook's findings at the JSON line of their cell. Its diff is labelled by cell, not by file
    line, so fixes come without a suggestion: `devmod apply` makes them."""
    from ..notebooks import file_line
    with open(report.path, encoding="utf-8") as handle:
        text = handle.read()
    out = []
    for finding in report.findings:
        cell = getattr(finding, "cell", None)
        line = file_line(text, cell, finding.line) if cell else finding.line
        moved = dataclasses.replace(finding, line=line, column=1)
        diagnostic = _finding_diagnostic(report.path, moved, docs_url)
        where = f"cell {cell}: " if cell else ""
        status = " (fixed by `devmod apply`)" if finding.fixed else ""
        diagnostic["message"] = f"{where}{finding.code} {diagnostic['message']}{status}"
        out.append(diagnostic)
    return out


def _fix_diagnostic(fix: LineFix, docs_url: str) -> dict:
    code = fix.codes[0] if fix.codes else "DM"
    why = " ".join(f"{c}: {why_sentence(c)}" + (f" Prevents `{rule_error(c)}`." if rule_error(c) else "")
                   for c in fix.codes)
    if fix.unsafe:
        why += " Unsafe fix: it changes behaviour a reviewer must accept."
    first = max(fix.start, 1) if fix.old else min(fix.end + 1, len(fix.before) or 1)
    return {"message": why, "location": {"path": fix.path, "range": {"start": {"line": first, "column": 1}}},
            "severity": "WARNING", "source": SOURCE, "code": {"value": code, "url": rule_link(code, docs_url)},
            "suggestions": [_suggestion(fix)]}


def _suggestion(fix: LineFix) -> dict:
    new = "".join(line.rstrip("\r\n") + "\n" for line in fix.new)
    if not fix.old:  # insertion: a zero-width range at the start of the line after the anchor
        at = {"line": fix.end + 1, "column": 1}
        return {"range": {"start": at, "end": at}, "text": new}
    start = {"line": fix.start, "column": 1}
    if not fix.new:  # deletion: through the start of the next line, so the line breaks go too
        return {"range": {"start": start, "end": {"line": fix.end + 1, "column": 1}}, "text": ""}
    last = fix.old[-1].rstrip("\r\n")
    end = {"line": fix.end, "column": len(last.encode("utf-8")) + 1}
    return {"range": {"start": start, "end": end}, "text": new[:-1]}


def _finding_diagnostic(path: str, finding, docs_url: str) -> dict:
    message = f"{finding.message}. {why_sentence(finding.code)}"
    if rule_error(finding.code):
        message += f" Prevents `{rule_error(finding.code)}`."
    return {"message": message,
            "location": {"path": path, "range": {"start": {"line": max(finding.line, 1),
                                                           "column": max(finding.column, 1)}}},
            "severity": "WARNING", "source": SOURCE,
            "code": {"value": finding.code, "url": rule_link(finding.code, docs_url)}}


def apply_unified_diff(before: str, diff: str) -> str:
    """``before`` with the hunks of ``diff`` (made from it by the driver) applied."""
    lines = before.splitlines(keepends=True)
    out: list[str] = []
    position = 0  # next line of ``lines`` not yet copied
    diff_lines = diff.splitlines(keepends=True)
    index, last = 0, ""
    while index < len(diff_lines):
        match = _HUNK.match(diff_lines[index])
        index += 1
        if not match:
            continue
        start = int(match.group(1)) - (0 if match.group(2) == "0" else 1)
        out.extend(lines[position:start])
        position = start
        while index < len(diff_lines) and not diff_lines[index].startswith("@@"):
            line = diff_lines[index]
            index += 1
            if line.startswith("\\"):  # "\ No newline at end of file": the added line above has none
                if last == "+" and out and out[-1].endswith("\n"):
                    out[-1] = out[-1][:-1]
                continue
            last = line[:1]
            if line.startswith(" "):
                out.append(lines[position])
                position += 1
            elif line.startswith("-"):
                position += 1
            elif line.startswith("+"):
                out.append(line[1:])
    out.extend(lines[position:])
    return "".join(out)
