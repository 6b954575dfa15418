"""What a pull request changes, read with git from the local checkout.

GitHub shows a PR as the three-dot diff (merge base of base and head, to head) with three
lines of context, and accepts review comments only on lines of that diff's right side.
The same diff here gives the files to review and the lines a comment may anchor to.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)
GITHUB_CONTEXT = 3  # lines of context in the diff GitHub shows on a pull request


class GitError(Exception):
    """git failed; the message says what to do about it."""


def git(repo: str, *args: str) -> bytes:
    try:
        done = subprocess.run(["git", "-C", repo, *args], capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on PATH") from exc
    if done.returncode != 0:
        reason = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"`git {' '.join(args)}` failed: {reason[-1] if reason else 'exit ' + str(done.returncode)}")
    return done.stdout


def resolve(repo: str, rev: str) -> str:
    """The full commit id of ``rev``; a clear error when the checkout does not have it."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except GitError:
        raise GitError(f"commit {rev} is not in the local checkout at {repo}; check out the pull request "
                       "with its history (actions/checkout with `fetch-depth: 0`)") from None


def _range(repo: str, base: str, head: str) -> list[str]:
    """The three-dot range GitHub uses, or the plain two-commit diff when there is no merge base."""
    try:
        git(repo, "merge-base", base, head)
        return [f"{base}...{head}"]
    except GitError:
        return [base, head]


def changed_files(repo: str, base: str, head: str) -> list[str]:
    """Files added, modified or renamed by the PR (deleted files have nothing to review)."""
    out = git(repo, "diff", "--name-only", "--no-renames", "--diff-filter=AM", "-z", *_range(repo, base, head))
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


@dataclass(frozen=True)
class DiffLines:
    """The right-side line ranges (1-based, inclusive) of one file's PR diff hunks."""

    hunks: tuple[tuple[int, int], ...]

    def covers(self, start: int, end: int) -> bool:
        """True when lines ``start``..``end`` all lie in one hunk (GitHub's rule for a comment)."""
        return any(lo <= start and end <= hi for lo, hi in self.hunks)


def diff_lines(repo: str, base: str, head: str, path: str) -> DiffLines:
    out = git(repo, "diff", f"-U{GITHUB_CONTEXT}", "--no-renames", "--no-color", "--no-ext-diff",
              *_range(repo, base, head), "--", path).decode("utf-8", "replace")
    return DiffLines(tuple(parse_hunk_ranges(out)))


def parse_hunk_ranges(diff: str) -> list[tuple[int, int]]:
    ranges = []
    for match in _HUNK.finditer(diff):
        start, count = int(match.group(1)), int(match.group(2) or 1)
        if count:
            ranges.append((start, start + count - 1))
    return ranges


def read_at(repo: str, commit: str, path: str) -> bytes:
    return git(repo, "show", f"{commit}:{path}")


def tree_files(repo: str, commit: str) -> dict[str, str]:
    """Every regular file at ``commit``: path -> git mode (100644, 100755)."""
    out = git(repo, "ls-tree", "-r", "-z", commit).decode("utf-8", "surrogateescape")
    files = {}
    for entry in out.split("\0"):
        if not entry:
            continue
        meta, path = entry.split("\t", 1)
        mode, kind, _ = meta.split(" ")
        if kind == "blob" and mode in ("100644", "100755"):
            files[path] = mode
    return files
