"""What a rule reports about one place in a file.

Kept apart from the rules (which need libcst) so that reading cached results and printing
them never imports the parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Safety = Literal["safe", "unsafe", "report"]


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    line: int
    column: int
    message: str
    fixed: bool
    safety: Safety
    replacement: str | None = None  # what an unapplied unsafe fix would write
    cell: int | None = None  # notebooks: the 1-based cell; ``line`` is then the line in that cell

    def format(self, path: str) -> str:
        if self.cell is not None:
            path = f"{path}:cell-{self.cell}"
        status = "fixed" if self.fixed else ("unsafe fix available, use --unsafe-fixes" if self.replacement is not None else "not fixed")
        text = f"{path}:{self.line}:{self.column}: {self.code} {self.message} [{status}]"
        if self.replacement is not None and not self.fixed:
            text += "\n    would write: " + self.replacement.strip().replace("\n", "\n    ")
        return text
