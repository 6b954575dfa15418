"""One GitHub review from the engine's results: suggestion comments, a body, hidden markers.

Every comment and every body entry carries ``<!-- devmod:RULE:path:hash -->``. The hash covers
the rule codes and the text replaced (never line numbers), so a later push that only shifts the
code finds the same marker and posts nothing twice; a marker posted before and absent now is a
fix that no longer applies, reported once as outdated.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

from ..catalogue import SAFETY_LABEL
from ..rules import rule_by_code
from ..rules.base import Finding
from .gitdiff import DiffLines
from .suggestions import RULES_DOC_URL, LineFix, Span, finding_key, rule_error, rule_link, why_sentence

MARKER = re.compile(r"<!-- devmod:([A-Z0-9+]+:[^\n]*?:[0-9a-f-]+) -->")
OUTDATED = re.compile(r"<!-- devmod-outdated:([A-Z0-9+]+:[^\n]*?:[0-9a-f-]+) -->")
MAX_BODY = 60000  # GitHub refuses review bodies over 65536 characters


@dataclass
class FileResult:
    """One reviewed file: its fixes, the findings devmod does not fix, or why it failed."""

    path: str
    fixes: list[LineFix] = field(default_factory=list)
    findings: list[tuple[Finding, str]] = field(default_factory=list)  # (finding, text of its line)
    error: str | None = None
    lines: DiffLines | None = None  # where the PR's diff allows comments


@dataclass
class Entry:
    """One thing to tell the author, as a comment when its lines are in the diff, else in the body."""

    key: str
    path: str
    comment: dict | None
    body: str


@dataclass
class Plan:
    entries: list[Entry]
    posted: set[str]  # keys already on the PR
    outdated: list[str]  # keys posted before whose fix is gone, not yet reported
    summary: str
    errors: list[Entry]  # files that could not be processed, keyed like fixes so they are said once

    @property
    def new(self) -> list[Entry]:
        return [e for e in self.entries if e.key not in self.posted]

    @property
    def new_errors(self) -> list[Entry]:
        return [e for e in self.errors if e.key not in self.posted]

    @property
    def worth_posting(self) -> bool:
        return bool(self.new or self.outdated or self.new_errors)


def marker(key: str) -> str:
    return f"<!-- devmod:{key} -->"


def posted_keys(texts: list[str]) -> tuple[set[str], set[str]]:
    """Keys found in earlier comments and review bodies, and keys already reported outdated."""
    posted, outdated = set(), set()
    for text in texts:
        posted.update(MARKER.findall(text or ""))
        outdated.update(OUTDATED.findall(text or ""))
    return posted, outdated


def fix_key(fix: LineFix) -> str:
    return f"{'+'.join(fix.codes) or 'DM'}:{fix.path}:{fix.key}"


def plan_review(results: list[FileResult], summary: str, posted_texts: list[str],
                docs_url: str = RULES_DOC_URL) -> Plan:
    entries: list[Entry] = []
    errors: list[Entry] = []
    for result in results:
        if result.error:
            key = f"ERROR:{result.path}:{hashlib.sha1(result.error.encode()).hexdigest()[:12]}"
            errors.append(Entry(key, result.path, None, f"- `{result.path}`: {result.error} {marker(key)}"))
            continue
        for fix in result.fixes:
            entries.append(_fix_entry(fix, result.lines, docs_url))
        for finding, line_text in result.findings:
            entries.append(_finding_entry(result.path, finding, line_text, result.lines, docs_url))
    posted, reported = posted_keys(posted_texts)
    current = {e.key for e in entries} | {e.key for e in errors}
    outdated = sorted(k for k in posted - current - reported if not k.startswith("ERROR:"))
    return Plan(entries, posted, outdated, summary, errors)


def _fix_entry(fix: LineFix, lines: DiffLines | None, docs_url: str) -> Entry:
    key = fix_key(fix)
    text = _explain(fix.codes, docs_url)
    if fix.unsafe:
        text += ("\n\n**Unsafe fix**: this changes behaviour a reviewer must accept (see the rule); "
                 "check it before committing.")
    span = next((s for s in fix.spans() if lines is not None and lines.covers(s.start, s.end)), None)
    comment = None
    if span is not None:
        comment = _anchored(fix.path, span, text + "\n\n" + _suggestion(span) + "\n" + marker(key))
    if "DM101" in fix.codes and comment is None:
        text += ("\n\nThe other suggestions use this device variable: apply this change too "
                 "(GitHub allows no suggestion on these lines).")
    where = f"line {fix.start}" if fix.end <= fix.start else f"lines {fix.start}-{fix.end}"
    if not fix.old:
        where = f"after line {fix.end}"
    body = (f"<details><summary>{' '.join(fix.codes)} in <code>{fix.path}</code> ({where})</summary>\n\n"
            f"{text}\n\n```diff\n{fix.unified()}```\n{marker(key)}\n</details>")
    return Entry(key, fix.path, comment, body)


def _finding_entry(path: str, finding: Finding, line_text: str, lines: DiffLines | None, docs_url: str) -> Entry:
    key = f"{finding.code}:{path}:{finding_key(finding, line_text)}"
    rule = rule_by_code(finding.code)
    label = f"[{finding.code} {rule.NAME if rule else finding.name}]({rule_link(finding.code, docs_url)})"
    cell = getattr(finding, "cell", None)  # notebooks: say which cell, the JSON line is hard to read
    label += f" (cell {cell})" if cell else ""
    text = f"**{label}** ({SAFETY_LABEL.get(finding.safety, finding.safety)}, not fixed automatically): " \
           f"{finding.message}. {why_sentence(finding.code)}"
    error = rule_error(finding.code)
    if error:
        text += f" Prevents `{error}`."
    if finding.replacement:
        text += f"\n\nWould write (unsafe, review it): `{finding.replacement.strip()}`"
    comment = None
    if lines is not None and finding.line and lines.covers(finding.line, finding.line):
        comment = {"path": path, "line": finding.line, "side": "RIGHT", "body": text + "\n" + marker(key)}
    body = f"- `{path}:{finding.line}` {text} {marker(key)}"
    return Entry(key, path, comment, body)


def _explain(codes: list[str], docs_url: str) -> str:
    parts = []
    for code in codes:
        rule = rule_by_code(code)
        name = rule.NAME if rule else ""
        line = f"**[{code} {name}]({rule_link(code, docs_url)})**: {why_sentence(code)}"
        error = rule_error(code)
        if error:
            line += f" Prevents `{error}`."
        parts.append(line)
    return "\n".join(parts)


def _suggestion(span: Span) -> str:
    content = "".join(line.rstrip("\r\n") + "\n" for line in span.lines)
    fence = "```"
    while fence in content:  # a longer fence keeps backticks in the code from closing the block
        fence += "`"
    return f"{fence}suggestion\n{content}{fence}"


def _anchored(path: str, span: Span, body: str) -> dict:
    comment = {"path": path, "body": body, "line": span.end, "side": "RIGHT"}
    if span.start != span.end:
        comment = {"path": path, "body": body, "start_line": span.start, "start_side": "RIGHT",
                   "line": span.end, "side": "RIGHT"}
    return comment


def review_body(plan: Plan, moved: dict[str, str] | None = None) -> str:
    """The review's text: the summary line, fixes outside the diff, findings, outdated markers.

    ``moved`` maps keys of comments GitHub refused to why, so they land here instead.
    """
    moved = moved or {}
    new = plan.new
    inline = [e for e in new if e.comment is not None and e.key not in moved]
    outside = [e for e in new if e.comment is None or e.key in moved]
    lines = [f"**devmod** review: {plan.summary.removeprefix('devmod: ')}"]
    if inline:
        lines.append(f"\n{len(inline)} suggestion{'s' if len(inline) != 1 else ''} below; "
                     "each can be committed with one click.")
    if plan.posted & {e.key for e in plan.entries}:
        lines.append(f"{len(plan.posted & {e.key for e in plan.entries})} posted by an earlier run and still open.")
    if outside:
        lines.append(f"\n{len(outside)} outside this pull request's diff (GitHub allows no comment there):\n")
        shown = 0
        for entry in outside:
            reason = f" ({moved[entry.key]})" if entry.key in moved else ""
            text = entry.body.replace("</summary>", f"{reason}</summary>", 1) if reason else entry.body
            if sum(len(x) for x in lines) + len(text) > MAX_BODY:
                break
            lines.append(text)
            shown += 1
        if shown < len(outside):
            lines.append(f"\n... and {len(outside) - shown} more: run `devmod apply --diff` locally to see them.")
    if plan.outdated:
        lines.append(f"\n{len(plan.outdated)} earlier suggestion{'s' if len(plan.outdated) != 1 else ''} "
                     "no longer apply (fixed or changed since):")
        lines += [f"- {k.split(':')[0]} in `{k.split(':')[1]}` <!-- devmod-outdated:{k} -->" for k in plan.outdated]
    if plan.new_errors:
        lines.append("\nFiles devmod could not process:")
        lines += [e.body for e in plan.new_errors]
    return "\n".join(lines)


def review_request(plan: Plan, head: str, fail_on_findings: bool, moved: dict[str, str] | None = None) -> dict:
    """The exact body of POST /repos/{owner}/{repo}/pulls/{number}/reviews."""
    moved = moved or {}
    comments = [e.comment for e in plan.new if e.comment is not None and e.key not in moved]
    event = "REQUEST_CHANGES" if fail_on_findings and plan.entries else "COMMENT"
    return {"commit_id": head, "event": event, "body": review_body(plan, moved), "comments": comments}


def counts_by_rule(results: list[FileResult]) -> Counter:
    counts: Counter = Counter()
    for result in results:
        for fix in result.fixes:
            counts.update(f.code for f in fix.findings)
    return counts
