"""`devmod apply --interactive`: review each fix as a coloured hunk and accept or skip it.

Every fix the engine would make is asked about, in the order of the file. The hunk
shown is exactly what accepting that fix changes: the engine runs with the fixes
accepted so far plus this one, and its output is compared with the run without it.
The file written is the engine's own output for the fixes accepted (the others are
declined through ``RunState.allow``, like a suppression comment), re-parsed like any
rewrite; so accepting every fix of some rules gives what ``--select`` of those rules
gives. A fix is known by its rule, its line and column in the file as read, and its
message. Adding the shared ``device`` variable (DM101) comes with the first accepted
fix that needs it and is shown in that fix's hunk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Sequence

import click

from .analysis.project import ProjectIndex
from .config import Config
from .driver import FileReport, unified_diff
from .engine import SourceError, TransformResult, transform_source
from .rules import all_rules
from .source_file import decode_source, unencodable, wide_encoding_problem, write_atomic

Key = tuple[str, int, int, str]  # (code, line, column, message) in the file as read
SHARED_DEVICE = "DM101"
HELP = """\
y - apply this fix
n - skip this fix
a - apply this fix and every remaining one, in this file and the ones after it
d - skip this fix and the rest of this file
q - quit: keep the fixes accepted so far (this file is written with them), skip the rest
? - show this help"""
KEYS = "y,n,a,d,q,?"


class Quit(Exception):
    """The user pressed q."""


@dataclass
class _Run:
    result: TransformResult
    asked: list[Key] = field(default_factory=list)  # every fix the engine offered, in order
    applied: set[Key] = field(default_factory=set)


@dataclass
class Session:
    """Answers that outlive one file: `a` (accept everything left) and `q`."""

    read_key: Callable[[], str] = click.getchar
    accept_all: bool = False
    quit: bool = False
    skipped: int = 0


class _FileReview:
    def __init__(self, path: str, source: str, config: Config, role, session: Session) -> None:
        self.path, self.source, self.config, self.role, self.session = path, source, config, role, session
        self.accepted: set[Key] = set()
        self.declined: set[Key] = set()
        self.device_ok = False  # DM101 may add/move the shared device (a fix needing it was accepted)
        self.rules = {r.CODE: r for r in all_rules()}

    def run(self, extra: Key | None = None, rest: bool = False, device: bool = False) -> _Run:
        """The engine with the decisions so far, plus ``extra``; ``rest``: undecided fixes too."""
        record = _Run(TransformResult(self.source, self.source))

        def allow(code: str, line: int, column: int, message: str) -> bool:
            key = (code, line, column, message)
            record.asked.append(key)
            if key in self.accepted or key == extra:
                ok = True
            elif key in self.declined:
                ok = False
            else:
                ok = rest or (code == SHARED_DEVICE and (self.device_ok or device))
            if ok:
                record.applied.add(key)
            return ok

        record.result = transform_source(self.source, self.path, self.config, role=self.role, allow=allow)
        return record

    def review(self) -> str:
        """Ask about each fix; returns the text to write (the source when nothing was accepted)."""
        if self.session.accept_all:
            return self.run(rest=True).result.output
        base = self.run()
        header_shown = False
        while True:
            pending = [k for k in dict.fromkeys(base.asked) if k not in self.accepted and k not in self.declined]
            if not pending:
                return base.result.output
            key = min(pending, key=lambda k: (k[1] == 0, k[1], k[2]))
            candidate = self.run(extra=key, device=True)
            if key not in candidate.applied or candidate.result.output == base.result.output:
                self.declined.add(key)  # not reachable alone, or changes nothing: nothing to ask
                continue
            if not header_shown:
                click.echo(click.style(f"--- {self.path}", bold=True))
                header_shown = True
            also = sorted(candidate.applied - base.applied - {key}, key=lambda k: (k[1], k[2]))
            self._show(key, also, base.result.output, candidate.result.output,
                       len(self.accepted) + len(self.declined) + 1,
                       len(self.accepted) + len(self.declined) + len(pending))
            answer = self._answer()
            if answer in ("y", "a"):
                self.accepted |= {key, *also}
                self.device_ok = self.device_ok or any(k[0] == SHARED_DEVICE for k in also)
                base = candidate
                if answer == "a":
                    self.session.accept_all = True
                    return self.run(rest=True).result.output
            elif answer == "n":
                self.declined.add(key)
            elif answer == "d":
                self.declined.update(pending)
            elif answer == "q":
                self.session.quit = True
                return base.result.output

    def _show(self, key: Key, also: Sequence[Key], before: str, after: str, number: int, total: int) -> None:
        code, line, column, message = key
        rule = self.rules.get(code)
        where = f"{self.path}:{line}:{column}" if line else self.path
        click.echo(click.style(f"({number}/{total}) {code} {rule.NAME if rule else ''}", fg="yellow", bold=True)
                   + f"  {where}")
        click.echo(f"  {message}")
        if rule is not None and rule.ERROR:
            click.echo(click.style(f"  prevents: {rule.ERROR}", dim=True))
        for other in also:
            click.echo(f"  with {other[0]}: {other[3]}")
        diff = unified_diff(before, after, self.path)
        for text in diff.splitlines(keepends=True)[2:]:  # the file header was printed once
            colour = "green" if text.startswith("+") else "red" if text.startswith("-") else \
                "cyan" if text.startswith("@@") else None
            click.echo(click.style(text, fg=colour) if colour else text, nl=False)

    def _answer(self) -> str:
        while True:
            click.echo(click.style(f"Apply this fix [{KEYS}]? ", fg="blue", bold=True), nl=False)
            try:
                key = self.session.read_key()
            except EOFError:
                key = "q"
            key = (key or "").strip().lower()[:1]
            click.echo(key)
            if key in ("y", "n", "a", "d", "q"):
                return key
            click.echo(HELP)


def review_files(paths: Sequence[str], config: Config, session: Session | None = None) -> list[FileReport]:
    """Review and write each file in turn; files after a `q` are left untouched."""
    session = session or Session()
    index = ProjectIndex.around(paths)
    reports: list[FileReport] = []
    for path in paths:
        if session.quit:
            break
        reports.append(_review_file(path, config, index.role_for(path), session))
    return reports


def _review_file(path: str, config: Config, role, session: Session) -> FileReport:
    report = FileReport(path)
    if path.endswith(".ipynb"):  # left as they are: review them with `devmod apply --diff`
        report.skipped = "notebooks are not reviewed interactively"
        click.echo(f"{path}: notebook left unchanged: review it with `devmod apply --diff`", err=True)
        return report
    try:
        with open(path, "rb") as handle:
            read_stat = os.fstat(handle.fileno())  # an edit saved while the user reviews is a conflict
            data = handle.read()
        if b"torch" not in data:
            report.error = f"0:0: {problem}" if (problem := wide_encoding_problem(data)) else None
            report.skipped = None if report.error else "does not use torch"
            return report
        text = decode_source(data)
    except OSError as exc:
        report.error = f"0:0: cannot read: {exc.strerror or exc}"
        return report
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        report.error = f"0:0: cannot decode: {exc}"
        return report
    review = _FileReview(path, text.text, config, role, session)
    try:
        review.review()
        # The file is the engine's own output for the accepted fixes (re-parsed by the engine).
        final = review.run(rest=session.accept_all)
    except SourceError as exc:
        report.error = f"{exc.line}:{exc.column}: {exc.message}"
        return report
    output = final.result.output
    session.skipped += len(review.declined)
    report.findings, report.skipped = final.result.findings, final.result.skipped
    try:
        new_data = text.encode(output)
    except UnicodeEncodeError as exc:  # a --device-name the file's encoding cannot hold
        report.error = f"0:0: {unencodable(exc, text.encoding)}"
        return report
    if output != text.text and new_data != data:
        try:
            write_atomic(path, new_data, expected=(data, read_stat))
            report.changed = True
        except OSError as exc:
            report.error = f"0:0: cannot write: {exc.strerror or exc}"
    return report
