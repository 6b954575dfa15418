"""The `devmod verify` command."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict

import click

from .runner import RunOutcome

EXIT_CLEAN, EXIT_OTHER, EXIT_USAGE, EXIT_DEVICE = 0, 1, 2, 3


@click.command(context_settings={"ignore_unknown_options": True})
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--real", "mode", flag_value="real", help="Run on the real GPU (error if there is none).")
@click.option("--simulate", "mode", flag_value="simulate",
              help="Run on a simulated cuda:0 even if a real GPU is present.")
@click.option("--compare", is_flag=True,
              help="Rewrite a temporary copy with devmod and run both; the original is never modified.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON on stdout (for bots).")
def verify(script: str, args: tuple[str, ...], mode: str | None, compare: bool, as_json: bool) -> None:
    """Run SCRIPT as __main__ and report device errors at your line.

    On a machine with a GPU the script runs there; without one it runs on a
    simulated cuda:0: tensors carry a virtual device while their data stays on the
    CPU, and mixing devices raises the same error a real GPU would. Arguments after
    `--` are passed to the script: `devmod verify train.py -- --epochs 1`.

    \b
    Exit status: 0 ran clean; 3 a device error (the report names the file, the
    line, the devices and the devmod rule that fixes it); 1 the script failed for
    another reason (its traceback is shown); 2 the command line was wrong.
    """
    simulate = _choose_simulation(mode)
    if compare:
        sys.exit(_compare(script, args, simulate, as_json))
    from .runner import run_script

    # With --json, stdout carries only the JSON: the script's own prints go to stderr.
    with contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext():
        outcome = run_script(script, args, simulate=simulate)
    if as_json:
        click.echo(json.dumps(asdict(outcome), indent=2))
    else:
        _report(script, outcome)
    sys.exit(outcome.exit_code)


def _choose_simulation(mode: str | None) -> bool:
    try:
        from .runner import real_gpu_available
        has_gpu = real_gpu_available()
    except ImportError:
        click.echo("devmod verify: error: PyTorch is not installed in this environment "
                   "(`pip install torch`)", err=True)
        sys.exit(EXIT_USAGE)
    if mode == "real" and not has_gpu:
        click.echo("devmod verify: error: --real needs a CUDA GPU and none is available here; "
                   "drop --real to use the simulated GPU", err=True)
        sys.exit(EXIT_USAGE)
    return mode == "simulate" or (mode is None and not has_gpu)


def _report(script: str, outcome: RunOutcome) -> None:
    where = "simulated cuda:0" if outcome.mode == "simulated" else f"{outcome.mode} device"
    if outcome.kind == "clean":
        devices = ", ".join(outcome.param_devices) or "no model parameters used"
        click.echo(f"devmod verify: {script} ran clean on {where} (model parameters on: {devices})", err=True)
        return
    if outcome.kind == "device-error":
        click.echo(f"{outcome.path}:{outcome.line}: device error ({where})", err=True)
        if outcome.source_line:
            click.echo(f"    {outcome.source_line}", err=True)
        click.echo(outcome.message, err=True)
        devices = sorted(set(re.findall(r"\b(cuda:\d+|cpu)\b", outcome.message)))
        if devices:
            click.echo(f"devices involved: {' and '.join(devices)}", err=True)
        if outcome.hint:
            click.echo(f"hint: devmod rule {outcome.hint} would fix this; try "
                       f"`devmod apply --diff {script}`", err=True)
        return
    click.echo(outcome.traceback or outcome.message, err=True, nl=False)
    click.echo(f"devmod verify: {script} failed for a reason other than device placement", err=True)


def _run_subprocess(script: str, args: tuple[str, ...], simulate: bool, extra_path: str) -> RunOutcome:
    command = [sys.executable, "-m", "codemods.verify.runner", *(["--simulate"] if simulate else []), script, *args]
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, package_root, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return RunOutcome("error", "simulated" if simulate else "real", proc.stderr.strip()[-500:])
    return RunOutcome(**json.loads(lines[-1]))


def _compare(script: str, args: tuple[str, ...], simulate: bool, as_json: bool) -> int:
    from ..engine import SourceError, transform_source
    from ..source_file import decode_source

    with open(script, "rb") as handle:
        data = handle.read()
    try:
        text = decode_source(data)
        rewritten = transform_source(text.text, script).output
    except (SourceError, UnicodeDecodeError, SyntaxError) as exc:
        click.echo(f"devmod verify: error: cannot rewrite {script}: {exc}", err=True)
        return EXIT_USAGE
    folder = tempfile.mkdtemp(prefix="devmod-compare-")
    try:
        copy = os.path.join(folder, os.path.basename(script))
        with open(copy, "wb") as handle:
            handle.write(text.encode(rewritten))
        origin = os.path.dirname(os.path.abspath(script))
        before = _run_subprocess(script, args, simulate, origin)
        after = _run_subprocess(copy, args, simulate, origin)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    after.path = after.path.replace(copy, f"{script} (rewritten)")
    if as_json:
        click.echo(json.dumps({"before": asdict(before), "after": asdict(after),
                               "changed": rewritten != text.text}, indent=2))
    else:
        rows = [("run", "mode", "outcome", "detail")]
        for label, outcome in (("before", before), ("after", after)):
            rows.append((label, outcome.mode, outcome.kind, _detail(outcome)))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for row in rows:
            click.echo("  ".join(c.ljust(w) for c, w in zip(row[:3], widths)) + "  " + row[3])
        if rewritten == text.text:
            click.echo("(devmod changes nothing in this script)")
    return {"clean": EXIT_CLEAN, "device-error": EXIT_DEVICE}.get(after.kind, EXIT_OTHER)


def _detail(outcome: RunOutcome) -> str:
    if outcome.kind == "clean":
        return "model parameters on " + (", ".join(outcome.param_devices) or "-")
    where = f"line {outcome.line}: " if outcome.line else ""
    return (where + outcome.message.splitlines()[0])[:110] if outcome.message else ""
