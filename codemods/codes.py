"""The rule codes, known without importing the rules.

The rules need libcst, whose import costs more than answering an unchanged project from the
cache; the command line only needs the codes to check ``--select`` and ``[tool.devmod]``.
A test keeps this list equal to the codes of the imported rules.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

_CODE = re.compile(r'^\s+CODE\s*=\s*["\']([A-Z]+\d+)["\']', re.MULTILINE)


@lru_cache(maxsize=1)
def rule_codes() -> tuple[str, ...]:
    """Every rule's code, read from the files of ``codemods/rules`` (one rule per file)."""
    folder = Path(__file__).resolve().parent / "rules"
    codes: list[str] = []
    for path in sorted(folder.glob("*.py")):
        if path.name != "base.py" and not path.name.startswith("_"):
            codes.extend(_CODE.findall(path.read_text(encoding="utf-8")))
    return tuple(sorted(codes))
