"""`--format sarif`: SARIF 2.1.0, the format GitHub code scanning reads.

One run of the tool ``devmod`` with every rule's metadata (id, name, descriptions, help
linked to the rule's entry in docs/rules.md), one ``result`` per finding and, where devmod
knows the fix, the fix as ``artifactChanges``: whole-line replacements taken from the
rewrite, so a SARIF viewer can offer them. Files that cannot be processed are tool
execution notifications, not results. Lines and columns count from 1; columns count
Unicode code points (``columnKind``).

Notebooks: a result points at the line of the .ipynb file that holds the cell's line (what
code scanning shows), names the cell in its message and properties, and carries no fix
(the rewrite of a JSON string is not a line replacement a viewer could apply).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable
from urllib.parse import quote

from .. import __version__
from ..driver import FileReport
from ..rules import all_rules
from ..rules.base import Finding, Rule

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
RULES_DOC_URL = "https://github.com/devmod/devmod/blob/main/docs/rules.md"
INFORMATION_URI = "https://github.com/devmod/devmod"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_SAFETY = {"safe": "safe fix", "unsafe": "unsafe fix (needs --unsafe-fixes)", "report": "report only"}


def rule_help_uri(rule: type[Rule], docs_url: str = RULES_DOC_URL) -> str:
    """The rule's section in docs/rules.md (GitHub's heading anchor of "## DM101 shared-device")."""
    return f"{docs_url}#{rule.CODE.lower()}-{rule.NAME}"


def rule_descriptor(rule: type[Rule], docs_url: str = RULES_DOC_URL) -> dict:
    documentation = rule.documentation()
    prevents = f"\n\nPrevents: `{rule.ERROR}`" if rule.ERROR else ""
    return {
        "id": rule.CODE,
        "name": _pascal(rule.NAME),
        "shortDescription": {"text": _plain(rule.SUMMARY)},
        "fullDescription": {"text": _plain(" ".join(documentation.split("\n\n")[:2]))},
        "help": {"text": (documentation + prevents).replace("`", ""), "markdown": documentation + prevents},
        "helpUri": rule_help_uri(rule, docs_url),
        "defaultConfiguration": {"level": "warning"},
        "properties": {"tags": ["pytorch", "device", _SAFETY[rule.SAFETY]], "precision": "high"},
    }


def _pascal(name: str) -> str:
    """SARIF suggests rule names in PascalCase: cuda-call -> CudaCall."""
    return "".join(part.capitalize() for part in name.split("-"))


def _plain(text: str) -> str:
    return " ".join(text.replace("`", "").split())


@dataclass(frozen=True)
class Change:
    """Original lines ``start``..``end`` (1-based, inclusive) become ``new``; for a pure insertion
    ``end == start - 1`` and ``after`` is the text of the line it follows (None at the top)."""

    start: int
    end: int
    new: tuple[str, ...]
    after: str | None = None

    def covers(self, line: int) -> bool:
        return self.start <= line <= max(self.end, self.start)

    def replacement(self) -> dict:
        if self.end >= self.start and not self.new:  # lines deleted, with their line breaks
            region = {"startLine": self.start, "startColumn": 1, "endLine": self.end + 1, "endColumn": 1}
            return {"deletedRegion": region, "insertedContent": {"text": ""}}
        if self.end >= self.start:  # lines replaced: to the end of the last one, its line break kept
            region = {"startLine": self.start, "startColumn": 1, "endLine": self.end}
            return {"deletedRegion": region, "insertedContent": {"text": "\n".join(self.new)}}
        if self.after is None:  # lines inserted at the top of the file
            region = {"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1}
            return {"deletedRegion": region, "insertedContent": {"text": "".join(f"{n}\n" for n in self.new)}}
        column = len(self.after) + 1  # lines inserted after line ``end``: at the end of that line
        region = {"startLine": self.end, "startColumn": column, "endLine": self.end, "endColumn": column}
        return {"deletedRegion": region, "insertedContent": {"text": "".join(f"\n{n}" for n in self.new)}}


def diff_changes(diff: str) -> list[Change]:
    """The runs of removed/added lines of a unified diff made by the driver."""
    changes: list[Change] = []
    old_line, previous = 0, None
    removed: list[str] = []
    added: list[str] = []
    first = 0

    def flush() -> None:
        nonlocal removed, added
        if removed or added:
            end = first + len(removed) - 1
            changes.append(Change(first, end, tuple(added), previous if not removed else None))
        removed, added = [], []

    for line in diff.splitlines():
        match = _HUNK.match(line)
        if match:
            flush()
            old_line = int(match.group(1)) - (0 if match.group(2) == "0" else 1)
            previous = None
            continue
        if line.startswith(("---", "+++", "\\")):
            continue
        if line.startswith(" "):
            flush()
            old_line += 1
            previous = line[1:]
        elif line.startswith("-"):
            if not removed and not added:
                first = old_line + 1
            removed.append(line[1:])
            old_line += 1
        elif line.startswith("+"):
            if not removed and not added:
                first = old_line + 1
            added.append(line[1:])
    flush()
    return changes


def assign_fixes(findings: list[Finding], changes: list[Change]) -> dict[int, list[Change]]:
    """Which changes carry each fixed finding's fix (by position in ``findings``): the changes on
    its line, else the nearest one (a finding made in a later pass can sit a line or two off). A
    change no finding sits on (the shared device's definition, a dropped import) goes to the
    DM101 finding, else to the nearest fixed finding."""
    fixed = [i for i, f in enumerate(findings) if f.fixed]
    if not fixed or not changes:
        return {}
    device = [i for i in fixed if findings[i].code == "DM101"]
    placed = [i for i in fixed if i not in device] or fixed

    def distance(change: Change, line: int) -> int:
        return 0 if change.covers(line) else min(abs(line - change.start), abs(line - max(change.end, change.start)))

    own: dict[int, list[Change]] = {i: [c for c in changes if c.covers(findings[i].line)] for i in placed}
    for i in placed:
        if not own[i]:
            own[i] = [min(changes, key=lambda c: distance(c, findings[i].line))]
    claimed = {id(c) for changes_ in own.values() for c in changes_}
    for change in changes:
        if id(change) not in claimed:
            owner = device[0] if device else min(placed, key=lambda i: distance(change, findings[i].line))
            own.setdefault(owner, []).append(change)
    return own


def artifact_uri(path: str) -> tuple[str, str | None]:
    """(uri, uriBaseId): relative to the working directory (%SRCROOT%) when the file is under it."""
    relative = os.path.relpath(os.path.abspath(path))
    if relative.startswith(".."):
        return "file://" + quote(os.path.abspath(path).replace(os.sep, "/")), None
    return quote(relative.replace(os.sep, "/")), "%SRCROOT%"


def _location(path: str, line: int, column: int) -> dict:
    uri, base = artifact_uri(path)
    artifact = {"uri": uri, **({"uriBaseId": base} if base else {})}
    region = {"startLine": max(line, 1), **({"startColumn": column} if column > 0 else {})}
    return {"physicalLocation": {"artifactLocation": artifact, "region": region}}


def sarif_document(reports: Iterable[FileReport], docs_url: str = RULES_DOC_URL) -> dict:
    """The SARIF log for ``reports`` made in diff mode (the files on disk are still unchanged)."""
    rules = sorted(all_rules(), key=lambda r: r.CODE)
    index = {rule.CODE: i for i, rule in enumerate(rules)}
    results: list[dict] = []
    notifications: list[dict] = []
    for report in reports:
        if report.error:
            line, column, reason = report.error.split(":", 2)
            where = f" (cell {report.error_cell})" if report.error_cell else ""
            notifications.append({"level": "error", "message": {"text": reason.strip() + where},
                                  "locations": [_location(report.path, int(line or 0), int(column or 0))]})
            continue
        results.extend(_results(report, index))
    run = {
        "tool": {"driver": {"name": "devmod", "version": __version__, "semanticVersion": __version__,
                            "informationUri": INFORMATION_URI,
                            "rules": [rule_descriptor(rule, docs_url) for rule in rules]}},
        "invocations": [{"executionSuccessful": not notifications,
                         "toolExecutionNotifications": notifications}],
        "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + quote(os.getcwd().replace(os.sep, "/").rstrip("/"))
                                             + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def _results(report: FileReport, index: dict[str, int]) -> list[dict]:
    notebook_text = None
    if report.path.endswith(".ipynb") and report.findings:
        with open(report.path, encoding="utf-8") as handle:
            notebook_text = handle.read()
    changes = diff_changes(report.diff) if report.diff and notebook_text is None else []
    fixes = assign_fixes(report.findings, changes)
    results = []
    for number, finding in enumerate(report.findings):
        status = "devmod fixes this" if finding.fixed else \
            "an unsafe fix is available with --unsafe-fixes" if finding.replacement is not None else "report only"
        result: dict = {"ruleId": finding.code, "ruleIndex": index[finding.code], "level": "warning",
                        "kind": "fail", "properties": {"fixable": finding.fixed, "safety": finding.safety}}
        if notebook_text is not None and finding.cell is not None:
            from ..notebooks import file_line

            line = file_line(notebook_text, finding.cell, finding.line)
            result["message"] = {"text": f"cell {finding.cell}, line {finding.line}: {finding.message} ({status})"}
            result["locations"] = [_location(report.path, line, 0)]
            result["properties"].update(cell=finding.cell, cellLine=finding.line, cellColumn=finding.column)
        else:
            result["message"] = {"text": f"{finding.message} ({status})"}
            result["locations"] = [_location(report.path, finding.line, finding.column)]
        own = fixes.get(number)
        if own:
            uri, base = artifact_uri(report.path)
            artifact = {"uri": uri, **({"uriBaseId": base} if base else {})}
            result["fixes"] = [{"description": {"text": finding.message},
                                "artifactChanges": [{"artifactLocation": artifact,
                                                     "replacements": [c.replacement() for c in own]}]}]
        results.append(result)
    return results
