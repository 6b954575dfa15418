"""Shared by the rule tests that check a whole rewrite (every rule on, as `devmod apply` runs)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from codemods.config import Config
from codemods.driver import process_files
from codemods.engine import transform_source


def run(code: str) -> tuple[str, list]:
    """The rewrite of ``code`` and its findings not fixed; a second run must change nothing."""
    code = textwrap.dedent(code)
    result = transform_source(code, config=Config())
    again = transform_source(result.output, config=Config())
    assert again.output == result.output, "a second run must change nothing"
    return result.output, [f for f in result.findings if not f.fixed]


def rewrite(code: str):
    """``(code dedented, the engine's whole result)`` with every rule on; a second run must change nothing."""
    code = textwrap.dedent(code)
    result = transform_source(code)
    assert transform_source(result.output).output == result.output, "a second run must change nothing"
    return code, result


def project_reports(folder: Path, files: dict[str, str]) -> dict[str, object]:
    """Write ``files`` (relative paths, dedented text) under ``folder`` and run ``apply --diff`` on all of
    them as one project: the report of each, by its path relative to ``folder``."""
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text))
    reports = list(process_files([str(folder / n) for n in files], Config(), "diff", jobs=1))
    errors = [f"{r.path}: {r.error}" for r in reports if r.error]
    assert not errors, errors  # an empty diff and no finding must mean devmod read the file
    return {Path(r.path).relative_to(folder).as_posix(): r for r in reports}


def run_rule(rule, code: str, all_rules: bool = False):
    """The engine's result for ``code`` (dedented) with only ``rule`` on (or every rule); a second run
    must change nothing."""
    code = textwrap.dedent(code)
    rules = None if all_rules else [rule]
    result = transform_source(code, config=Config(), rules=rules)
    again = transform_source(result.output, config=Config(), rules=rules)
    assert again.output == result.output, "a second run must change nothing"
    return result
