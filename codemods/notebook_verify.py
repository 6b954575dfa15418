"""`devmod verify notebook.ipynb`: run the code cells in order and name the cell of a device error.

The code cells become one script (IPython lines such as ``!pip install`` and
``%matplotlib inline`` are skipped: there is no IPython kernel here), the script runs
through verify's own runner, from the notebook's folder as Jupyter would, and every
location in the outcome is mapped back to ``notebook.ipynb:cell-N`` and the line in
that cell.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from typing import Iterator

import click

from .notebooks import NotebookError, Script, notebook_script, transform_notebook

EXIT_USAGE = 2


@contextlib.contextmanager
def _in_folder(folder: str) -> Iterator[None]:
    """Jupyter runs a notebook from its own folder and imports its neighbours."""
    saved_cwd, saved_path = os.getcwd(), sys.path[:]
    os.chdir(folder)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path


def map_outcome(outcome, script: Script, script_path: str, notebook: str) -> None:
    """Point ``outcome`` (a RunOutcome of ``script_path``) at the notebook's cells, in place."""
    outcome.script = notebook
    if outcome.path and os.path.abspath(outcome.path) == os.path.abspath(script_path):
        cell, line = script.lines[outcome.line - 1] if 0 < outcome.line <= len(script.lines) else (0, 0)
        outcome.path, outcome.line = f"{notebook}:cell-{cell}", line
        source = script.sources.get(cell, "").split("\n")
        outcome.source_line = source[line - 1].strip() if 0 < line <= len(source) else outcome.source_line

    def cell_frame(match: re.Match[str]) -> str:
        number = int(match.group(1))
        cell, line = script.lines[number - 1] if 0 < number <= len(script.lines) else (0, number)
        return f'File "{notebook}", cell {cell}, line {line}'

    if outcome.traceback:
        outcome.traceback = re.sub(rf'File "{re.escape(script_path)}", line (\d+)', cell_frame, outcome.traceback)


def verify_notebook(notebook: str, args: tuple[str, ...], simulate: bool, compare: bool, as_json: bool,
                    show_traceback: bool) -> int:
    """The verify command for a .ipynb; returns its exit status."""
    from .verify.command import report

    try:
        with open(notebook, encoding="utf-8") as handle:
            text = handle.read()
        script = notebook_script(text)
    except (OSError, UnicodeDecodeError, NotebookError) as exc:
        click.echo(f"devmod verify: error: cannot read {notebook}: {exc}", err=True)
        return EXIT_USAGE
    if script.ipython_lines and not as_json:
        click.echo(f"devmod verify: {notebook}: {script.ipython_lines} IPython line(s) (magics, shell escapes) "
                   "skipped; the code cells run in order as one script", err=True)
    if compare:
        return _compare(notebook, text, script, args, simulate, as_json)
    from .verify.runner import run_script

    folder = tempfile.mkdtemp(prefix="devmod-notebook-")
    try:
        path = os.path.join(folder, os.path.splitext(os.path.basename(notebook))[0] + ".py")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(script.text)
        nb_folder = os.path.dirname(os.path.abspath(notebook))
        with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext(), _in_folder(nb_folder):
            outcome = run_script(path, args, simulate=simulate)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    map_outcome(outcome, script, path, notebook)
    sys.stdout.flush()
    if as_json:
        click.echo(json.dumps(outcome.to_dict(), indent=2))
    else:
        report(outcome, show_traceback)
    return outcome.exit_code


def _compare(notebook: str, text: str, script: Script, args: tuple[str, ...], simulate: bool, as_json: bool) -> int:
    """Before/after: the notebook as it is and as devmod rewrites it, each in a fresh process."""
    from .verify.command import _Run, compare_table
    from .verify.runner import EXIT_CLEAN, EXIT_DEVICE, EXIT_ERROR

    try:
        rewritten_text = transform_notebook(text, notebook).output
        rewritten = notebook_script(rewritten_text)
    except NotebookError as exc:
        click.echo(f"devmod verify: error: cannot rewrite {notebook}: {exc}", err=True)
        return EXIT_USAGE
    folder = tempfile.mkdtemp(prefix="devmod-compare-")
    try:
        stem = os.path.splitext(os.path.basename(notebook))[0]
        paths = [os.path.join(folder, f"{stem}{suffix}.py") for suffix in ("", "_rewritten")]
        for path, version in zip(paths, (script, rewritten)):
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(version.text)
        origin = os.path.dirname(os.path.abspath(notebook))
        before, after = (run.outcome() for run in [_Run(path, args, simulate, origin) for path in paths])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    map_outcome(before, script, paths[0], notebook)
    map_outcome(after, rewritten, paths[1], f"{notebook} (rewritten)")
    changed = rewritten_text != text
    if as_json:
        click.echo(json.dumps({"before": before.to_dict(), "after": after.to_dict(), "changed": changed}, indent=2))
    else:
        click.echo(compare_table(before, after))
        for label, outcome in (("before", before), ("after", after)):
            if outcome.path:  # the table says "line N"; the cell is named here
                click.echo(f"{label}: {outcome.path}:{outcome.line}: {outcome.source_line}")
        if not changed:
            click.echo("(devmod changes nothing in this notebook)")
    return {"clean": EXIT_CLEAN, "device-error": EXIT_DEVICE}.get(after.kind, EXIT_ERROR)
