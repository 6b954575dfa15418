"""Where a position in a rewritten text was in the text it came from.

The engine runs its rules until a pass changes nothing; a fix found in the second
pass has a position in the first pass's output. `devmod apply --interactive` keys
each fix by its place in the file the user sees, so the engine maps later passes'
positions back through this map. Lines the rewrite left alone map exactly; an edited
line maps when the rewrite replaced as many lines as it had, and a column on it maps
when the characters at that column were kept. Anything else (a line a fix inserted)
has no origin.
"""

from __future__ import annotations

import difflib
import re

# The lines a finding's message names (``held at line 12``, ``lines 3, 7``): mapped with the finding.
LINES_IN_MESSAGE = re.compile(r"\bline (\d+(?:, \d+)*)")


class OriginMap:
    """Maps (line, column), 1-based, in ``current`` to the same place in ``original``."""

    def __init__(self, original: str, current: str) -> None:
        self._before = original.splitlines()
        self._after = current.splitlines()
        # autojunk off: blank lines are frequent in code and must still anchor the match.
        matcher = difflib.SequenceMatcher(None, self._before, self._after, autojunk=False)
        self._blocks = [op for op in matcher.get_opcodes()
                        if op[0] == "equal" or (op[0] == "replace" and op[2] - op[1] == op[4] - op[3])]

    def origin(self, line: int, column: int) -> tuple[int, int] | None:
        index = line - 1
        for tag, i1, _, j1, j2 in self._blocks:
            if j1 <= index < j2:
                before = i1 + index - j1
                if tag == "equal":
                    return before + 1, column
                mapped = _column_origin(self._before[before], self._after[index], column)
                return (before + 1, mapped) if mapped is not None else None
        return None


def _column_origin(before: str, after: str, column: int) -> int | None:
    index = column - 1
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for i1, j1, size in matcher.get_matching_blocks():
        if j1 <= index < j1 + size:
            return i1 + index - j1 + 1
    return None
