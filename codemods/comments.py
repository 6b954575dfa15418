"""Every comment of the input must still be in the output.

libcst's round trip is exact for the trees it builds, but a rule that replaces or
moves a statement can drop the comment lines attached to it. The engine re-parses
every rewrite; this module is the second check it runs, comparing the comment
tokens of input and output with the standard library's ``tokenize`` (not libcst, so
a libcst bug cannot hide itself).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections import Counter

# The comment line that opens each cell of a notebook joined into one program
# ("# devmod-cell-<nonce>: <index>"). A rule that moves a statement leaves it where it is.
CELL_MARKER = re.compile(r"# devmod-cell-\d+: \d+")


def is_cell_marker(comment: str | None) -> bool:
    """Whether a comment is a notebook cell's marker, which must never move."""
    return comment is not None and CELL_MARKER.fullmatch(comment.rstrip()) is not None


def comment_tokens(text: str) -> Counter[str] | None:
    """The comments of ``text`` (trailing spaces ignored), or None when it cannot be tokenized.

    Lines end at "\\r", "\\n" or "\\r\\n", as CPython splits them (newline=""), so a bare
    "\\r" inside a comment ends that comment for both input and output.
    """
    found: Counter[str] = Counter()
    try:
        for token in tokenize.generate_tokens(io.StringIO(text, newline="").readline):
            if token.type == tokenize.COMMENT:
                found[token.string.rstrip()] += 1
    except (tokenize.TokenError, SyntaxError):
        return None
    return found


def lost_comments(before: str, after: str) -> list[str]:
    """Comments of ``before`` missing from ``after`` (as many times as they are missing).

    An output that cannot be tokenized loses everything; an input that cannot be
    tokenized (CPython compiled it, so this is rare) cannot be checked and loses nothing.
    """
    old = comment_tokens(before)
    if not old:
        return []
    new = comment_tokens(after)
    if new is None:
        return sorted(old.elements())
    return sorted((old - new).elements())
