"""The ``devmod verify`` command (registered on the ``devmod`` group in codemods/cli.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import click

from .runner import EXIT_CLEAN, EXIT_DEVICE, EXIT_ERROR, EXIT_USAGE, RunOutcome

_HELP = """Run SCRIPT as __main__ and report device errors at your line.

SCRIPT runs in this process as `python SCRIPT ARGS...` would run it: sys.argv is
[SCRIPT, *ARGS], the script's folder is first on sys.path, the working directory
is unchanged. Put the script's own arguments after `--`:

\b
    devmod verify train.py -- --epochs 1 --batch-size 8

A notebook (.ipynb) runs its code cells in order as one script from its own
folder (IPython lines such as !pip are skipped); a device error names the cell
and the line in it: train.ipynb:cell-6:5.

Where it runs: on the real GPU when torch.cuda.is_available() is True, else on a
simulated cuda:0. The simulation needs no GPU and no CUDA build of PyTorch:
torch.cuda.is_available() returns True, every tensor carries a virtual device
(cpu or cuda:0) while its data stays on the CPU, and an operation that mixes
devices raises the error a GPU would raise ("Expected all tensors to be on the
same device ..."). Bugs that are silent on a CPU-only machine show up.
--real and --simulate force one or the other.

\b
Exit status:
  0  the script ran clean (a one-line summary on stderr; SystemExit(0) counts)
  3  a device error: the report gives the message, the path:line of the
     innermost frame in your own files with its source line, the devices
     involved and the devmod rule that would fix it
  1  the script failed for another reason (its traceback is shown)
  2  the command line was wrong (no such script, --real without a GPU, ...)

-m MODULE runs a module as `python -m MODULE ARGS...` would (the working
directory first on sys.path):

\b
    devmod verify -m mypkg.train -- --epochs 1

Child processes the script starts with the same Python (subprocess.run([
sys.executable, ...]), launchers, multiprocessing's spawn) see the simulated GPU
too: a startup hook on PYTHONPATH starts the simulation when they import torch,
and a device error that ends a child is reported for the parent (exit 3).
Nothing writes __pycache__ into your tree.

--compare copies the project (the folder with pyproject.toml, setup.py or .git
above SCRIPT; the working directory with -m) to a temporary folder, rewrites
every Python file of the copy with devmod (the original is never modified),
runs the entry point in both trees, each in a fresh Python process side by
side, and prints a before/after table; it exits 0 when the rewritten copy runs
clean, 3 when it still hits a device error, 1 otherwise.

--json prints the outcome as one JSON object on stdout (the script's own output
goes to stderr): kind (clean | device-error | error), mode, message, location,
path, line, source_line, devices, rule, rule_name, why, traceback,
param_devices (the devices model parameters were used on), exit_code.

The same simulation runs a pytest suite: pytest -p codemods.pytest_plugin
--simulate-cuda. What it cannot model is listed in docs/verify.md.
"""


@click.command(help=_HELP, context_settings={"ignore_unknown_options": True})
@click.argument("script", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("-m", "module", metavar="MODULE",
              help="Run MODULE as `python -m MODULE` would (the working directory first on sys.path); "
                   "every argument after it goes to the module.")
@click.option("--real", "mode", flag_value="real", help="Run on the real GPU; exit 2 if there is none.")
@click.option("--simulate", "mode", flag_value="simulate",
              help="Run on the simulated cuda:0, even where a real GPU is present.")
@click.option("--compare", is_flag=True,
              help="Rewrite a temporary copy of the project with devmod and run both: a before/after table.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON on stdout (for bots and CI).")
@click.option("--traceback", "show_traceback", is_flag=True, help="Also print the full traceback of a device error.")
@click.pass_context
def verify(ctx: click.Context, script: str | None, args: tuple[str, ...], module: str | None, mode: str | None,
           compare: bool, as_json: bool, show_traceback: bool) -> None:
    if module:
        args = (script, *args) if script is not None else args
        if args[:1] == ("--",):
            args = args[1:]
    elif script is None:
        _usage_error(ctx, "give a SCRIPT to run, or -m MODULE")
    elif not os.path.isfile(script):
        _usage_error(ctx, f"no such script: {script}" + (" (a folder; give its entry point, or -m MODULE)"
                                                          if os.path.isdir(script) else ""))
    simulate = _choose_simulation(ctx, mode)
    if not module and script.endswith(".ipynb"):  # the code cells run in order; errors name the cell
        from ..notebook_verify import verify_notebook

        ctx.exit(verify_notebook(script, args, simulate, compare, as_json, show_traceback))
    if compare:
        ctx.exit(_compare(script, module, args, simulate, as_json))
    from .runner import run_module, run_script

    # With --json, stdout carries only the JSON: the script's own prints go to stderr.
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        if module:
            try:
                outcome = run_module(module, args, simulate=simulate)
            except ModuleNotFoundError as exc:
                _usage_error(ctx, str(exc))
        else:
            outcome = run_script(script, args, simulate=simulate)
    sys.stdout.flush()  # the script's own output first, then the report
    if as_json:
        click.echo(json.dumps(outcome.to_dict(), indent=2))
    else:
        report(outcome, show_traceback)
    ctx.exit(outcome.exit_code)


def _usage_error(ctx: click.Context, message: str) -> None:
    click.echo(f"devmod verify: error: {message}", err=True)
    ctx.exit(EXIT_USAGE)


def _choose_simulation(ctx: click.Context, mode: str | None) -> bool:
    try:
        from .runner import real_gpu_available

        has_gpu = real_gpu_available()
    except ImportError:
        click.echo("devmod verify: error: PyTorch is not installed in this environment (pip install torch)", err=True)
        ctx.exit(EXIT_USAGE)
    if mode == "real" and not has_gpu:
        click.echo("devmod verify: error: --real needs a CUDA GPU and torch.cuda.is_available() is False here; "
                   "leave out --real to run on the simulated cuda:0", err=True)
        ctx.exit(EXIT_USAGE)
    return mode == "simulate" or (mode is None and not has_gpu)


def _where(outcome: RunOutcome) -> str:
    return {"simulated": "simulated cuda:0", "real": "the real GPU"}.get(outcome.mode, "the CPU (no simulation)")


def report(outcome: RunOutcome, show_traceback: bool = False) -> None:
    """The human-readable report, on stderr."""
    script = outcome.script
    if outcome.kind == "clean":
        params = " and ".join(outcome.param_devices)
        detail = f"model parameters on {params}" if params else "no model parameters took part in an operation"
        click.echo(f"devmod verify: {script} ran clean on {_where(outcome)} ({detail})", err=True)
        return
    if outcome.kind == "error":
        click.echo(outcome.traceback or outcome.message, err=True, nl=not outcome.traceback.endswith("\n"))
        click.echo(f"devmod verify: {script} failed on {_where(outcome)}, not with a device error: "
                   f"{outcome.message.splitlines()[0] if outcome.message else ''}", err=True)
        return
    if show_traceback and outcome.traceback:
        click.echo(outcome.traceback, err=True, nl=False)
    where = f"{outcome.path}:{outcome.line}" if outcome.path else script
    click.echo(f"{where}: device error on {_where(outcome)}", err=True)
    if outcome.source_line:
        click.echo(f"    {outcome.source_line}", err=True)
    click.echo(outcome.message, err=True)
    if outcome.devices:
        click.echo(f"devices involved: {' and '.join(outcome.devices)}", err=True)
    if outcome.rule:
        click.echo(f"hint: devmod rule {outcome.rule} ({outcome.rule_name}) would fix this: {outcome.why}", err=True)
        target = script if script.endswith(".py") else (outcome.path or ".")
        click.echo(f"      preview the fix with `devmod apply --diff {target}`", err=True)
    elif outcome.why:
        click.echo(f"hint: {outcome.why} (no devmod rule rewrites this)", err=True)


# -- --compare ---------------------------------------------------------------------------------
class _Run:
    """One run in a fresh interpreter, so nothing the first run imported leaks into the second.
    Started at once; both runs of --compare proceed side by side."""

    def __init__(self, target: list[str], args: tuple[str, ...], simulate: bool, cwd: str, shown: str) -> None:
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # no __pycache__ in the user's tree
        handle, self.result = tempfile.mkstemp(prefix="devmod-outcome-", suffix=".json")
        os.close(handle)
        self.script, self.mode = shown, "simulated" if simulate else "real"
        command = [sys.executable, "-m", "codemods.verify.runner", *(["--simulate"] if simulate else []),
                   "--result", self.result, *target, "--", *args]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     cwd=cwd)

    def outcome(self) -> RunOutcome:
        try:
            out, err = self.proc.communicate()
            with open(self.result, encoding="utf-8") as stream:
                text = stream.read()
            if text:
                return RunOutcome.from_dict(json.loads(text))
            return RunOutcome("error", self.mode, self.script,
                              f"the run died (exit status {self.proc.returncode})",
                              traceback=(err or out).strip()[-2000:])
        finally:
            os.unlink(self.result)


_PROJECT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
_NOT_COPIED = shutil.ignore_patterns(".git", ".hg", ".venv", "venv", "env", "__pycache__", "*.pyc", ".tox",
                                     ".mypy_cache", ".pytest_cache", "node_modules", "build", "dist", "*.egg-info")


def project_root(start: str) -> str:
    """The folder holding ``pyproject.toml`` / ``setup.py`` / ``.git`` above ``start``, else ``start``."""
    folder = os.path.abspath(start)
    while True:
        if any(os.path.exists(os.path.join(folder, marker)) for marker in _PROJECT_MARKERS):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return os.path.abspath(start)
        folder = parent


def rewrite_tree(folder: str) -> tuple[int, list[str]]:
    """Rewrite every Python file under ``folder`` in place with devmod's engine; returns how many
    changed and the files that could not be rewritten (left as they were)."""
    from ..engine import SourceError, mentions_torch, transform_source
    from ..source_file import decode_source

    changed, failed = 0, []
    for here, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(here, name)
            with open(path, "rb") as handle:
                data = handle.read()
            try:
                source = decode_source(data)
                if not mentions_torch(source.text):
                    continue
                rewritten = transform_source(source.text, path).output
            except (SourceError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
                failed.append(f"{os.path.relpath(path, folder)}: {exc}")
                continue
            if rewritten != source.text:
                with open(path, "wb") as handle:
                    handle.write(source.encode(rewritten))
                changed += 1
    return changed, failed


def _compare(script: str | None, module: str | None, args: tuple[str, ...], simulate: bool, as_json: bool) -> int:
    """The project (the folder with pyproject.toml / setup.py / .git above the script, or the
    working directory for -m) is copied to a temporary folder and rewritten there; the original
    and the copy run side by side, each from its own tree."""
    try:
        from ..engine import transform_source  # noqa: F401  (the engine is part of the package)
    except ImportError as exc:  # a broken install lands here
        click.echo(f"devmod verify: error: --compare needs the devmod engine ({exc})", err=True)
        return EXIT_USAGE
    cwd = os.getcwd()
    root = cwd if module else project_root(os.path.dirname(os.path.abspath(script or ".")))
    folder = tempfile.mkdtemp(prefix="devmod-compare-")
    try:
        copy_root = os.path.join(folder, os.path.basename(root) or "project")
        shutil.copytree(root, copy_root, ignore=_NOT_COPIED, symlinks=True)
        changed, failed = rewrite_tree(copy_root)
        for problem in failed:
            click.echo(f"devmod verify: could not rewrite {problem} (left as it was)", err=True)
        inside = os.path.relpath(cwd, root)
        copy_cwd = os.path.join(copy_root, inside) if not inside.startswith("..") else cwd
        if module:
            targets = (["-m", module], ["-m", module])
            shown = module
        else:
            relative = os.path.relpath(os.path.abspath(script), root)
            targets = ([os.path.abspath(script)], [os.path.join(copy_root, relative)])
            shown = script
        runs = [_Run(target, args, simulate, where, shown) for target, where in zip(targets, (cwd, copy_cwd))]
        before, after = (run.outcome() for run in runs)
        after.script = f"{shown} (rewritten)"
        if after.path.startswith(copy_root):
            after.path = os.path.relpath(after.path, copy_root)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if as_json:
        click.echo(json.dumps({"before": before.to_dict(), "after": after.to_dict(), "changed": changed > 0,
                               "files_changed": changed}, indent=2))
    else:
        click.echo(compare_table(before, after))
        click.echo(f"({changed} file(s) rewritten in a copy of {root})" if changed
                   else "(devmod changes nothing in this project)")
    return {"clean": EXIT_CLEAN, "device-error": EXIT_DEVICE}.get(after.kind, EXIT_ERROR)


def compare_table(before: RunOutcome, after: RunOutcome) -> str:
    rows = [("run", "mode", "outcome", "detail")]
    for label, outcome in (("before", before), ("after", after)):
        rows.append((label, outcome.mode, outcome.kind, _detail(outcome)))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths)) + "  " + row[3]
                     for row in rows)


def _detail(outcome: RunOutcome) -> str:
    if outcome.kind == "clean":
        return "model parameters on " + (" and ".join(outcome.param_devices) or "-")
    where = f"line {outcome.line}: " if outcome.line else ""
    rule = f" [{outcome.rule}]" if outcome.rule else ""
    first = outcome.message.splitlines()[0] if outcome.message else ""
    return (where + first)[:120] + rule
