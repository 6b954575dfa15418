"""One `devmod review` run: read the PR's files at its head commit, run the engine, post one review.

Posting never loses a fix: when GitHub refuses the review with 422 because of some comments
(a line it does not consider part of the diff), those comments are found by posting pending
reviews that are deleted at once, and they move into the review body as folded diffs; if even
that fails, every comment moves into the body. When nothing can be posted the review JSON is
printed so the run's log still holds it.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from typing import Callable, Iterable

from ..config import Config
from ..driver import FileReport
from ..engine import SourceError, transform_source
from ..source_file import decode_source
from .gitdiff import changed_files, diff_lines, read_at, resolve
from .payload import FileResult, Plan, plan_review, review_request
from .suggestions import RULES_DOC_URL, line_fixes

# How each kind of file is reviewed, by suffix: Python files, and notebooks when devmod reads them.
Reviewer = Callable[[str, bytes, Config], tuple[FileResult, FileReport]]
REVIEWERS: dict[str, Reviewer] = {}


def review_python(path: str, data: bytes, config: Config) -> tuple[FileResult, FileReport]:
    result, report = FileResult(path), FileReport(path)
    if b"torch" not in data:
        report.skipped = "does not use torch"
        return result, report
    try:
        text = decode_source(data).text
        out = transform_source(text, path, config)
    except SourceError as exc:
        result.error = report.error = f"{exc.line}:{exc.column}: {exc.message}"
        return result, report
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        result.error = report.error = f"0:0: cannot decode: {exc}"
        return result, report
    except Exception as exc:  # a rule bug costs this file only
        result.error = report.error = f"0:0: internal error ({type(exc).__name__}: {exc}); please report this"
        return result, report
    report.findings, report.changed = out.findings, out.changed
    result.fixes = line_fixes(path, out.source, out.output, out.findings)
    source_lines = out.source.splitlines()
    for finding in out.open_findings:  # at their lines in the pull request's head (the engine places them)
        line = finding.line
        line_text = source_lines[line - 1] if 0 < line <= len(source_lines) else ""
        result.findings.append((finding, line_text))
    return result, report


REVIEWERS[".py"] = review_python


def _register_notebooks() -> None:
    from . import notebook
    if notebook.available():  # codemods.notebooks (issue 10 part 2) is part of this install
        REVIEWERS[notebook.SUFFIX] = notebook.review_notebook


_register_notebooks()


def wanted(path: str, paths: Iterable[str], excludes: Iterable[str]) -> bool:
    """Reviewable kind, under one of ``paths`` (repository-relative), not matching an exclude glob."""
    if os.path.splitext(path)[1] not in REVIEWERS:
        return False
    prefixes = [p.strip("/").removeprefix("./") for p in paths if p.strip("/.")]
    if prefixes and not any(path == p or path.startswith(p + "/") for p in prefixes):
        return False
    parts = path.split("/")
    return not any(fnmatch.fnmatch(path, glob) or any(fnmatch.fnmatch(part, glob) for part in parts)
                   for glob in excludes)


@dataclass
class Analysis:
    results: list[FileResult]
    reports: list[FileReport]


def analyse_pull(repo: str, base: str, head: str, config: Config, paths: Iterable[str] = (),
                 excludes: Iterable[str] = ()) -> Analysis:
    """Run the engine on the reviewable files the PR adds or modifies, as they are at ``head``."""
    base, head = resolve(repo, base), resolve(repo, head)
    results, reports = [], []
    for path in changed_files(repo, base, head):
        if not wanted(path, paths, excludes):
            continue
        reviewer = REVIEWERS[os.path.splitext(path)[1]]
        result, report = reviewer(path, read_at(repo, head, path), config)
        if result.fixes or result.findings:
            result.lines = diff_lines(repo, base, head, path)
        results.append(result)
        reports.append(report)
    return Analysis(results, reports)


def summary_line(reports: list[FileReport]) -> str:
    from ..cli import _summary  # the CLI's own summary, so the review reads like the terminal
    return _summary(reports, "diff")


def build_plan(analysis: Analysis, posted_texts: list[str], docs_url: str = RULES_DOC_URL) -> Plan:
    return plan_review(analysis.results, summary_line(analysis.reports), posted_texts, docs_url)


@dataclass
class Posted:
    review: dict | None
    moved: dict[str, str]  # keys of comments GitHub refused -> why; they went into the body
    request: dict


def post_review(client, number: int, plan: Plan, head: str, fail_on_findings: bool,
                log: Callable[[str], None] = lambda _: None) -> Posted:
    """Post the plan as one review; comments GitHub refuses (422) move into the body."""
    from .errors import GitHubApiError
    moved: dict[str, str] = {}
    request = review_request(plan, head, fail_on_findings, moved)
    try:
        return Posted(client.create_review(number, request), moved, request)
    except GitHubApiError as exc:
        if exc.status != 422 or not request["comments"]:
            raise
        log(f"devmod: GitHub refused the review ({exc}); finding the comments it rejects")
    inline = [e for e in plan.new if e.comment is not None]
    try:
        rejected = _rejected(client, number, head, inline)
    except GitHubApiError as exc:  # cannot tell which: keep every fix by moving all into the body
        log(f"devmod: could not isolate the refused comments ({exc}); all go into the review body")
        rejected = inline
    reason = "GitHub refused a comment on these lines"
    moved = {e.key: reason for e in rejected}
    request = review_request(plan, head, fail_on_findings, moved)
    try:
        return Posted(client.create_review(number, request), moved, request)
    except GitHubApiError as exc:
        if exc.status != 422:
            raise
        log(f"devmod: GitHub refused the review again ({exc}); all suggestions go into the review body")
    moved = {e.key: reason for e in inline}
    request = review_request(plan, head, fail_on_findings, moved)
    return Posted(client.create_review(number, request), moved, request)


def _rejected(client, number: int, head: str, entries: list) -> list:
    """The entries whose comments GitHub refuses, by bisection with pending reviews deleted at once."""
    from .errors import GitHubApiError

    def accepted(group: list) -> bool:
        try:
            review = client.create_review(number, {"commit_id": head, "body": "devmod: checking comment lines",
                                                   "comments": [e.comment for e in group]})
        except GitHubApiError as exc:
            if exc.status == 422:
                return False
            raise
        client.delete_pending_review(number, review["id"])
        return True

    bad: list = []
    stack = [entries]
    while stack:
        group = stack.pop()
        if accepted(group):
            continue
        if len(group) == 1:
            bad.extend(group)
            continue
        half = len(group) // 2
        stack += [group[half:], group[:half]]
    return bad


def posted_texts(client, number: int) -> list[str]:
    """Bodies of the earlier review comments and reviews on the PR, where the markers are."""
    return [c.get("body") or "" for c in client.review_comments(number)] + \
        [r.get("body") or "" for r in client.reviews(number)]
