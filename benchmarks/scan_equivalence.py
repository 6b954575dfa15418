"""Does the engine's fast path change any answer? (`python benchmarks/scan_equivalence.py CORPUS`)

Runs every Python file of CORPUS through the engine twice, in one process, with one project
index: as it runs (one scan for all rules, libcst's visitors without copying; see
codemods/scan.py and codemods/fast_visit.py), then with both turned off (one libcst traversal
per rule, libcst's own visitors). Prints whether the output, findings and errors are identical
for every file, and names the files where they are not. Fetches nothing, writes nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from codemods import engine, fast_visit  # noqa: E402
from codemods.analysis.project import ProjectIndex  # noqa: E402
from codemods.config import Config  # noqa: E402
from codemods.discovery import iter_python_files  # noqa: E402


def main(corpus: str) -> int:
    texts = []
    for path in iter_python_files([corpus], []):
        if path.endswith(".py"):
            try:
                texts.append((path, Path(path).read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError):
                pass
    index = ProjectIndex.build(texts)

    def answers() -> list[object]:
        found: list[object] = []
        for path, text in texts:
            try:
                result = engine.transform_source(text, path, Config(), role=index.role_for(path))
                found.append((result.output, result.findings, result.skipped))
            except engine.SourceError as exc:
                found.append(("error", exc.message, exc.line, exc.column))
        return found

    fast = answers()
    engine.scan = lambda *args: False  # type: ignore[assignment]
    fast_visit.uninstall()
    slow = answers()
    different = [texts[i][0] for i in range(len(texts)) if fast[i] != slow[i]]
    print(f"{len(texts)} files: " + ("identical" if not different else "DIFFERENT in " + ", ".join(different)))
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
