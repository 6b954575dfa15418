"""Does the engine's fast path change any answer? (`python benchmarks/scan_equivalence.py CORPUS...`)

Runs every Python file of each CORPUS through the engine twice, in one process, with one
project index: as it runs (one scan for all rules, libcst's visitors without copying; see
codemods/scan.py and codemods/fast_visit.py), then with both turned off (one libcst traversal
per rule, libcst's own visitors). With ``--prefilter`` the second run keeps the fast path and
turns off only the ``ast`` prefilter (analysis/candidates.py: files no rule may act on are
never parsed by libcst), and the count of files it skipped is printed. Prints whether the
output, findings and errors are identical for every file, and names the files where they are
not. Fetches nothing, writes nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from codemods import engine, fast_visit  # noqa: E402
from codemods.analysis.project import ProjectIndex  # noqa: E402
from codemods.config import Config  # noqa: E402
from codemods.discovery import iter_python_files  # noqa: E402


def main(corpus: str, prefilter: bool = False) -> int:
    texts = []
    for path in iter_python_files([corpus], []):
        if path.endswith(".py"):
            try:
                texts.append((path, Path(path).read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError):
                pass
    index = ProjectIndex.build(texts)
    parsed = 0

    def answers() -> list[object]:
        found: list[object] = []
        for path, text in texts:
            try:
                result = engine.transform_source(text, path, Config(), role=index.role_for(path))
                found.append((result.output, result.findings, result.skipped))
            except engine.SourceError as exc:
                found.append(("error", exc.message, exc.line, exc.column))
        return found

    def counting(source: str):  # type: ignore[no-untyped-def]
        nonlocal parsed
        parsed += 1
        return parse(source)

    parse, engine.parse = engine.parse, counting  # type: ignore[assignment]
    fast = answers()
    skipped_parses = parsed
    if prefilter:
        os.environ[engine.NO_PREFILTER_ENV] = "1"
    else:
        engine.scan = lambda *args: False  # type: ignore[assignment]
        fast_visit.uninstall()
    parsed = 0
    slow = answers()
    os.environ.pop(engine.NO_PREFILTER_ENV, None)
    different = [texts[i][0] for i in range(len(texts)) if fast[i] != slow[i]]
    note = f" (libcst parsed {skipped_parses} of the {parsed} files the full run parsed)" if prefilter else ""
    print(f"{corpus}: {len(texts)} files{note}: " + ("identical" if not different else "DIFFERENT in " + ", ".join(different)))
    return 1 if different else 0


if __name__ == "__main__":
    arguments = sys.argv[1:]
    with_prefilter = "--prefilter" in arguments
    corpora = [a for a in arguments if a != "--prefilter"] or ["."]
    sys.exit(max(main(c, with_prefilter) for c in corpora))
