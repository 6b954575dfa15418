"""Engine output as line-anchored fixes: what a review comment or a reviewdog suggestion replaces.

The engine rewrites a whole file; a reviewer needs it cut into pieces, each one a run of
original lines and the lines that replace them. Those pieces come from diffing the original
against the rewrite (difflib opcodes), and each is labelled with the rule findings that sit on
its lines. GitHub suggestions replace whole lines, so a pure insertion is anchored to a
neighbouring line that the suggestion repeats.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass
from typing import Sequence

from ..rules import rule_by_code
from ..rules.base import Finding
from . import RULES_DOC_URL

SHARED_DEVICE_CODE = "DM101"
_DEVICE_DEFINITION = re.compile(r"^\s*\"?\w+\s*=\s*\(?\s*\w+\.(device|accelerator)\b")  # a notebook line is a JSON string


@dataclass(frozen=True)
class Span:
    """Replace original lines ``start``..``end`` (1-based, inclusive) with ``lines``."""

    start: int
    end: int
    lines: tuple[str, ...]


@dataclass(frozen=True)
class LineFix:
    """One contiguous change: original lines ``start``..``end`` become ``new``.

    For a pure insertion ``old`` is empty and ``end == start - 1`` (the new lines go after
    line ``end``).
    """

    path: str
    start: int
    end: int
    old: tuple[str, ...]
    new: tuple[str, ...]
    findings: tuple[Finding, ...]
    before: tuple[str, ...]  # the whole original file, for anchoring insertions
    key: str = ""

    @property
    def codes(self) -> list[str]:
        return sorted({f.code for f in self.findings})

    @property
    def unsafe(self) -> bool:
        return any(f.safety == "unsafe" for f in self.findings)

    def spans(self) -> list[Span]:
        """Whole-line replacements that make this change, best first.

        A replacement is its own span. An insertion has none of its own, so it is offered
        as "the line above, then the new lines" and as "the new lines, then the line below".
        """
        if self.old:
            return [Span(self.start, self.end, self.new)]
        spans = []
        if self.end >= 1:
            spans.append(Span(self.end, self.end, (self.before[self.end - 1], *self.new)))
        if self.end < len(self.before):
            spans.append(Span(self.end + 1, self.end + 1, (*self.new, self.before[self.end])))
        return spans

    def unified(self, context: int = 2) -> str:
        """A small unified diff of this change alone, for the review body."""
        lo = max(1, self.start - context)
        hi = min(len(self.before), self.end + context)
        head = self.before[lo - 1:self.start - 1]
        tail = self.before[self.end:hi]
        old_count = len(head) + len(self.old) + len(tail)
        new_count = len(head) + len(self.new) + len(tail)
        out = [f"@@ -{lo},{old_count} +{lo},{new_count} @@\n"]
        out += [" " + _nl(line) for line in head]
        out += ["-" + _nl(line) for line in self.old]
        out += ["+" + _nl(line) for line in self.new]
        out += [" " + _nl(line) for line in tail]
        return "".join(out)


def _nl(line: str) -> str:
    line = line.rstrip("\r\n")
    return line + "\n"


def line_fixes(path: str, before: str, after: str, findings: Sequence[Finding]) -> list[LineFix]:
    """Cut the rewrite of one file into LineFixes labelled with the fixed findings on their lines."""
    old_lines = before.splitlines(keepends=True)
    new_lines = after.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    raw = [(i1, i2, j1, j2) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]
    fixed = [f for f in findings if f.fixed]
    labels: list[list[Finding]] = [[] for _ in raw]
    definitions = [k for k, (i1, i2, j1, j2) in enumerate(raw) if _defines_device(new_lines[j1:j2], old_lines[i1:i2])]
    for finding in fixed:
        best = _closest(raw, finding.line)
        if finding.code == SHARED_DEVICE_CODE and definitions:
            # DM101 reports the first use of the device; its change is the definition it adds.
            best = min(definitions, key=lambda k: abs(raw[k][0] + 1 - finding.line))
        if best is not None:
            labels[best].append(finding)
    fixes: list[LineFix] = []
    seen: dict[str, int] = {}
    for (i1, i2, j1, j2), found in zip(raw, labels):
        if not found and fixed:  # a change with no finding on its lines: credit the nearest fix
            nearest = min(fixed, key=lambda f: abs(f.line - (i1 + 1)))
            found = [nearest]
        fix = LineFix(path, i1 + 1, i2, tuple(old_lines[i1:i2]), tuple(new_lines[j1:j2]),
                      tuple(found), tuple(old_lines))
        anchor = () if fix.old or not fix.spans() else fix.spans()[0].lines
        base = _hash(fix.codes, fix.old, fix.new, anchor)
        seen[base] = seen.get(base, 0) + 1  # identical changes in one file stay distinct
        key = base if seen[base] == 1 else f"{base}-{seen[base]}"
        fixes.append(LineFix(fix.path, fix.start, fix.end, fix.old, fix.new, fix.findings, fix.before, key))
    return fixes


def line_in_output(before: str, after: str):
    """Map a line of ``before`` to its line in the rewrite ``after`` (a line inside a replaced
    run maps to the start of its replacement). The fix pull request shows the rewritten file."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    opcodes = matcher.get_opcodes()

    def to_output(line: int) -> int:
        for tag, i1, i2, j1, _ in opcodes:
            if i1 < line <= i2:
                return j1 + (line - i1) if tag == "equal" else j1 + 1
        return line
    return to_output


def _defines_device(new: list[str], old: list[str]) -> bool:
    added = [line for line in new if line not in old]
    return any(_DEVICE_DEFINITION.match(line) for line in added)


def _closest(raw: list[tuple[int, int, int, int]], line: int) -> int | None:
    """The change whose original lines hold ``line`` (an insertion also owns the line above it)."""
    for index, (i1, i2, _, _) in enumerate(raw):
        if i1 < i2 and i1 + 1 <= line <= i2:
            return index
        if i1 == i2 and line in (i1, i1 + 1):
            return index
    if not raw:
        return None
    # A finding from a later engine pass points into shifted text: take the nearest change.
    return min(range(len(raw)), key=lambda k: min(abs(line - (raw[k][0] + 1)), abs(line - raw[k][1])))


def _hash(codes: list[str], old: tuple[str, ...], new: tuple[str, ...], anchor: tuple[str, ...]) -> str:
    # Line numbers are left out on purpose: a push that shifts the code must not re-post the fix.
    text = "\x1f".join(codes) + "\x1e" + "".join(old) + "\x1e" + "".join(new) + "\x1e" + "".join(anchor)
    return hashlib.sha1(text.replace("\r\n", "\n").encode("utf-8")).hexdigest()[:12]


def finding_key(finding: Finding, line_text: str) -> str:
    """A stable key for a report-only finding: its rule, message and the code on its line."""
    text = f"{finding.code}\x1e{finding.message}\x1e{line_text.strip()}"
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]


def rule_anchor(code: str) -> str:
    """The rule's heading anchor in docs/rules.md (as GitHub renders `## DM103 cuda-call`)."""
    rule = rule_by_code(code)
    return f"{code.lower()}-{rule.NAME}" if rule else code.lower()


def rule_link(code: str, docs_url: str = RULES_DOC_URL) -> str:
    return f"{docs_url}#{rule_anchor(code)}"


def why_sentence(code: str) -> str:
    """One sentence of why, from the rule's own documentation ("Why: ..."), else its summary."""
    rule = rule_by_code(code)
    if rule is None:
        return ""
    doc = rule.documentation()
    match = re.search(r"Why:\s*(.+?)(?:\n\s*\n|$)", doc, re.S)
    if not match:  # no "Why:" section: the first paragraph after the title line explains it
        paragraphs = [p for p in re.split(r"\n\s*\n", doc) if p.strip()]
        match = re.match(r"(.+)", paragraphs[1], re.S) if len(paragraphs) > 1 else None
    if not match:
        return rule.SUMMARY
    paragraph = re.sub(r"``(.+?)``", r"`\1`", " ".join(match.group(1).split()))  # reST literals -> Markdown
    sentence = paragraph
    for end in re.finditer(r"(?:(?<=[.!?])|(?<=[.!?]\"))\s+(?=[A-Z`(])", paragraph):
        if paragraph[:end.start()].count('"') % 2 == 0:  # not inside a quoted error message
            sentence = paragraph[:end.start()]
            break
    return sentence if sentence.rstrip("\"").endswith((".", "!", "?")) else sentence + "."


def rule_error(code: str) -> str:
    rule = rule_by_code(code)
    return rule.ERROR if rule else ""
