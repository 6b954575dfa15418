"""Comments that tell devmod to leave code alone; read once per file by the engine.

- ``# devmod: ignore[DM104, DM2]`` or a bare ``# devmod: ignore`` on a line;
- ``# noqa: DM104`` (and a bare ``# noqa``), as ruff and flake8 users write them;
- ``# devmod: skip-file`` anywhere in the file.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

_IGNORE = re.compile(r"#\s*devmod:\s*ignore(?:\[(?P<codes>[^\]]*)\])?", re.IGNORECASE)
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_SKIP_FILE = re.compile(r"#\s*devmod:\s*skip-file\b", re.IGNORECASE)
_MENTIONED = re.compile(r"devmod|noqa", re.IGNORECASE)
ALL = "*"


@dataclass
class Suppressions:
    """Line number -> suppressed code prefixes (ALL for every code)."""

    by_line: dict[int, set[str]] = field(default_factory=dict)
    skip_file: bool = False

    def suppresses(self, code: str, line: int) -> bool:
        prefixes = self.by_line.get(line)
        return bool(prefixes) and (ALL in prefixes or any(code.startswith(p) for p in prefixes))


def read_suppressions(source: str) -> Suppressions:
    result = Suppressions()
    if not _MENTIONED.search(source):
        return result  # the common case costs one search; case-insensitive like the patterns below
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return result
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        text = token.string
        if _SKIP_FILE.search(text):
            result.skip_file = True
        for pattern in (_IGNORE, _NOQA):
            match = pattern.search(text)
            if match:
                codes = match.group("codes")
                found = {c.strip().upper() for c in re.split(r"[\s,]+", codes) if c.strip()} if codes else {ALL}
                result.by_line.setdefault(token.start[0], set()).update(found or {ALL})
    return result
