"""What every file must pass before libcst sees it.

CPython's own compiler is the judge of what is Python: code it refuses (Python 2
``except E, e:``, a BOM with a latin-1 cookie, more than 200 nested brackets) is an
error even where libcst's more lenient parser would accept it, and libcst's native
parser is never handed the pathological nesting that makes it crash the process.
Nesting that CPython compiles but that would make the rules recurse for minutes is
refused with a bounded error instead.
"""

from __future__ import annotations

import ast
import contextlib
import io
import sys
import tokenize
from typing import Iterator

from .analysis.ast_walk import add_ast_children

# AST depth 1,100 is a chain of about 550 method calls (`.cuda().cuda()...`): processed in
# tens of seconds on a slow core. CPython itself stops at 200 nested brackets.
MAX_DEPTH = 1100
# Deep trees make libcst's visitors recurse: enough frames for MAX_DEPTH, restored afterwards.
RECURSION_LIMIT = 12_000


class PreflightError(Exception):
    """The file is not something devmod may parse; ``line``/``column`` are 1-based (0 unknown)."""

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


def check_source(source: str) -> ast.Module:
    """CPython's syntax tree of ``source``; PreflightError unless it compiles and its nesting is reasonable."""
    try:
        tree = compile(source, "<file>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        raise PreflightError(f"cannot parse: {exc.msg}", exc.lineno or 0, exc.offset or 0) from None
    except (RecursionError, MemoryError):
        raise PreflightError("cannot parse: nested too deeply for Python to compile") from None
    except ValueError as exc:  # null bytes on older Pythons
        raise PreflightError(f"cannot parse: {exc}") from None
    depth, line = _depth(tree)
    if depth > MAX_DEPTH:
        raise PreflightError(f"nested too deeply for devmod (syntax tree depth {depth}, limit {MAX_DEPTH}); "
                             "file left unchanged", line, 1)
    return tree


def _depth(tree: ast.AST) -> tuple[int, int]:
    """The deepest node's depth and line, without recursion (the tree may be very deep): one
    level at a time, with the project's cheap child walk (``ctx`` nodes are not counted)."""
    depth, level, line = 0, [tree], 0
    while level:
        depth += 1
        line = next((n.lineno for n in level if hasattr(n, "lineno")), line)
        below: list[ast.AST] = []
        for node in level:
            add_ast_children(node, below)
        level = below
    return depth, line


def eof_padding(source: str) -> str:
    """The newline libcst needs after a line continuation that ends the file.

    CPython compiles ``x = 1 \\`` followed by CRLF at the very end; libcst does not, unless
    one more newline follows. The engine parses with it and takes it off the output.
    """
    for ending in ("\\\r\n", "\\\n", "\\\r"):
        if source.endswith(ending):
            return ending[1:]
    return ""


_NOT_CODE = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER)


def split_trailing_comments(source: str) -> tuple[str, str]:
    """``source`` as (code, the comment and blank lines after the last line of code).

    libcst attaches comment lines at the end of a file to whichever block they are indented
    like, and a rule that replaces that block (or libcst itself, for lines indented deeper
    than any block) drops them. The engine transforms only the code and puts the tail back
    byte for byte.
    """
    lines = list(iter(io.StringIO(source).readline, ""))  # the lines tokenize numbers
    last = 0
    try:
        for token in tokenize.generate_tokens(iter(lines).__next__):
            if token.type not in _NOT_CODE:
                last = token.end[0]
    except (tokenize.TokenError, SyntaxError, StopIteration):
        return source, ""
    if last == 0 or last >= len(lines):
        return source, ""
    cut = sum(len(line) for line in lines[:last])
    return source[:cut], source[cut:]


@contextlib.contextmanager
def deep_recursion() -> Iterator[None]:
    """Let libcst's recursive visitors handle trees up to MAX_DEPTH."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)
