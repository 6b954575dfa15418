"""Fix pull request mode: one commit of `devmod apply` on a branch, and a PR that lists the fixes.

Like pre-commit.ci and Dependabot, for the first sweep of a repository. The commit is built
through GitHub's git data API (blobs, a tree on top of the checked-out commit, a commit, the
branch ref) so it needs no push credentials; a later run moves the same branch and updates the
open PR instead of opening another.
"""

from __future__ import annotations

import base64
import dataclasses
import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from ..config import Config
from ..discovery import Exclude, iter_python_files
from ..driver import FileReport
from ..engine import SourceError, transform_source
from ..source_file import decode_source
from .suggestions import line_in_output, rule_link

BRANCH = "devmod/fixes"
TITLE = "devmod: put every tensor, model and batch on one shared device"


@dataclass
class Sweep:
    changed: dict[str, bytes] = field(default_factory=dict)  # repository-relative path -> new bytes
    modes: dict[str, str] = field(default_factory=dict)
    reports: list[FileReport] = field(default_factory=list)


def sweep(repo: str, paths: list[str], config: Config, excludes: list[Exclude]) -> Sweep:
    """`devmod apply` in memory over the checkout: what each file would become."""
    result = Sweep()
    roots = [os.path.join(repo, p) for p in (paths or ["."])]
    for full in iter_python_files(roots, excludes):
        rel = os.path.relpath(full, repo).replace(os.sep, "/")
        report = FileReport(rel)
        result.reports.append(report)
        with open(full, "rb") as handle:
            data = handle.read()
        if b"torch" not in data:
            continue
        try:
            if rel.endswith(".ipynb"):
                from .notebook import transform_notebook_bytes
                new, report.findings = transform_notebook_bytes(rel, data, config)
                new = data if new is None else new
            else:
                text = decode_source(data)
                out = transform_source(text.text, rel, config)
                # the pull request shows the rewritten file: its open findings at their lines there
                to_output = line_in_output(out.source, out.output)
                report.findings = [dataclasses.replace(f, line=to_output(f.line)) if not f.fixed and f.line else f
                                   for f in out.findings]
                new = text.encode(out.output)
        except SourceError as exc:
            report.error = f"{exc.line}:{exc.column}: {exc.message}"
            continue
        except Exception as exc:  # an undecodable notebook or a crashing file costs only itself
            report.error = f"0:0: {type(exc).__name__}: {getattr(exc, 'message', exc)}"
            continue
        if new != data:
            report.changed = True
            result.changed[rel] = new
            result.modes[rel] = "100755" if os.stat(full).st_mode & 0o111 else "100644"
    return result


def pr_body(result: Sweep, summary: str, docs_url: str) -> str:
    by_rule: dict[str, Counter] = defaultdict(Counter)
    for report in result.reports:
        for finding in report.findings:
            if finding.fixed:
                by_rule[finding.code][report.path] += 1
    lines = [f"**devmod** rewrote {len(result.changed)} file{'s' if len(result.changed) != 1 else ''} so every "
             "tensor, model and batch lands on one shared device.", "", f"`{summary}`", "",
             "| rule | fixes | files |", "| --- | --- | --- |"]
    for code in sorted(by_rule):
        files = by_rule[code]
        listed = ", ".join(f"`{p}` ({n})" for p, n in sorted(files.items()))
        lines.append(f"| [{code}]({rule_link(code, docs_url)}) | {sum(files.values())} | {listed} |")
    open_findings = [(r.path, f) for r in result.reports for f in r.findings if not f.fixed]
    if open_findings:
        lines += ["", "Not fixed automatically (a person should look):", ""]
        lines += [f"- `{p}:{f.line}` [{f.code}]({rule_link(f.code, docs_url)}) {f.message}" for p, f in open_findings]
    errors = [r for r in result.reports if r.error]
    if errors:
        lines += ["", "Files devmod could not process:", ""] + [f"- `{r.path}`: {r.error}" for r in errors]
    lines += ["", "Made by `devmod review --mode fix-pr`; re-running it updates this pull request."]
    return "\n".join(lines)


def requests_for(result: Sweep, head: str, base_ref: str, body: str, branch: str = BRANCH) -> list[dict]:
    """The API requests a fix PR takes, for --dry-run (ids GitHub would return are placeholders)."""
    out = []
    for index, (path, data) in enumerate(sorted(result.changed.items())):
        out.append({"method": "POST", "path": "git/blobs",
                    "body": {"content": base64.b64encode(data).decode(), "encoding": "base64"},
                    "note": f"{path} -> <blob {index}>"})
    out.append({"method": "POST", "path": "git/trees", "body": {"base_tree": head, "tree": _tree(result)}})
    out.append({"method": "POST", "path": "git/commits",
                "body": {"message": TITLE, "tree": "<tree>", "parents": [head]}})
    out.append({"method": "POST", "path": "git/refs", "body": {"ref": f"refs/heads/{branch}", "sha": "<commit>"}})
    out.append({"method": "POST", "path": "pulls", "body": {"title": TITLE, "head": branch, "base": base_ref,
                                                             "body": body}})
    return out


def _tree(result: Sweep, shas: dict[str, str] | None = None) -> list[dict]:
    shas = shas or {}
    return [{"path": path, "mode": result.modes[path], "type": "blob",
             "sha": shas.get(path, f"<blob {index}>")}
            for index, path in enumerate(sorted(result.changed))]


def open_fix_pr(client, result: Sweep, head: str, base_ref: str, body: str, branch: str = BRANCH) -> dict:
    shas = {path: client.create_blob(base64.b64encode(data).decode())
            for path, data in sorted(result.changed.items())}
    tree = client.create_tree(head, _tree(result, shas))
    commit = client.create_commit(TITLE, tree, head)
    client.set_branch(branch, commit)
    existing = client.open_pull_for(branch)
    if existing:
        return client.update_pull(existing["number"], TITLE, body)
    return client.create_pull(TITLE, branch, base_ref, body)
