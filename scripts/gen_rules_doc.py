"""Regenerate docs/rules.md from the rules themselves; `--check` exits 1 when it is stale.

    python scripts/gen_rules_doc.py [--check]
"""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from codemods.catalogue import rules_markdown  # noqa: E402

TARGET = ROOT / "docs" / "rules.md"


def main(argv: list[str]) -> int:
    text = rules_markdown()
    if "--check" in argv:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.relative_to(ROOT)} is stale: run `python scripts/gen_rules_doc.py`", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
