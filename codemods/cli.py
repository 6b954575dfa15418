"""The `devmod` command line.

Exit codes are a contract for CI and bots: 0 done, 1 `--check` found something,
2 a file could not be processed or the command line was wrong (3 is `verify`'s
device error).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import Counter

import click

from . import __version__
from .config import DEVICE_STYLES, ConfigError, find_pyproject, load_config, validate_codes
from .device_name import name_problem
from .discovery import Exclude, iter_python_files
from .cache import Cache
from .codes import rule_codes
from .driver import FileReport, process_files
from .interrupts import EXIT_INTERRUPTED, Interrupted, interrupted_message, stop_on_signals
from .executors import ExecutorError, open_executor

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2


def _codes(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    raw = [c for item in value for c in item.split(",") if c.strip()]
    try:
        return tuple(validate_codes(raw, list(rule_codes()), f"--{param.name}"))
    except ConfigError as exc:
        raise click.BadParameter(str(exc).split(": ", 1)[-1]) from exc


class _LazyGroup(click.Group):
    """Imports a subcommand's module only when that command runs or is listed (click's
    documented lazy-loading pattern): ``apply`` answered from the cache loads neither
    ``verify`` nor ``review``."""

    lazy = {"verify": "codemods.verify.command", "review": "codemods.review.command"}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            import importlib
            self.add_command(getattr(importlib.import_module(self.lazy[name]), name))
        return super().get_command(ctx, name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="devmod")
def main() -> None:
    """devmod puts every PyTorch tensor, model and batch on one shared device.

    \b
      devmod apply --diff src/    review what would change (nothing is written)
      devmod apply src/           rewrite the files in place
      devmod apply --check src/   for CI: exit 1 when anything would change or a finding remains
      devmod verify train.py      run a script on a GPU, or a simulated one
      devmod rules                list the rules; `devmod rules DM103` explains one
    """


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, dir_okay=True, file_okay=True))
@click.option("--diff", "show_diff", is_flag=True, help="Print a unified diff to stdout; write nothing.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if any file would change or a finding remains.")
@click.option("--unsafe-fixes", is_flag=True, default=None,
              help="Also apply fixes that change behaviour a reviewer must accept (state_dict keys, ...).")
@click.option("--select", multiple=True, callback=_codes, metavar="CODES",
              help="Only these rule codes or prefixes (DM1, DM103); repeat or comma-separate.")
@click.option("--ignore", multiple=True, callback=_codes, metavar="CODES", help="Skip these rule codes or prefixes.")
@click.option("--exclude", multiple=True, metavar="GLOB",
              help="Skip files and folders whose name, or path from the current directory, matches GLOB.")
@click.option("--device-name", metavar="NAME", help="Name of the shared device variable (default: device).")
@click.option("--device-style", type=click.Choice(DEVICE_STYLES),
              help="How the shared device is chosen: cuda (default), cuda-mps, accelerator.")
@click.option("--force-exclude/--no-force-exclude", default=True, show_default=True,
              help="Skip Python environments (venv, conda, pixi, site-packages) even when named explicitly.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: all cores).")
@click.option("--no-cache", is_flag=True,
              help="Neither read nor store results in the cache (default: ~/.cache/devmod or $DEVMOD_CACHE_DIR).")
@click.option("--executor", metavar="URL",
              help="Run on a Dask cluster instead of local processes: dask://HOST:PORT (needs devmod[dask]).")
@click.option("--format", "output_format", type=click.Choice(["text", "json", "github", "rdjson", "sarif"]),
              default="text", show_default=True,
              help="How findings are printed (json and github for bots and CI; rdjson for reviewdog and sarif "
                   "for GitHub code scanning, which write nothing, like --diff).")
@click.option("-i", "--interactive", is_flag=True,
              help="Show each fix as a coloured hunk and ask: y apply, n skip, a all remaining, "
                   "d skip the rest of the file, q quit keeping what was accepted, ? help.")
@click.option("--fail-on-findings/--no-fail-on-findings", default=False,
              help="Exit 1 when findings devmod cannot fix remain, even when writing (the pre-commit hook's "
                   "default).")
@click.option("-v", "--verbose", is_flag=True, help="Also list every fix applied.")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors (and the diff with --diff).")
def apply(paths: tuple[str, ...], show_diff: bool, check: bool, unsafe_fixes: bool | None,
          select: tuple[str, ...], ignore: tuple[str, ...], exclude: tuple[str, ...],
          device_name: str | None, device_style: str | None, force_exclude: bool, jobs: int | None,
          no_cache: bool, executor: str | None, output_format: str, interactive: bool, fail_on_findings: bool,
          verbose: bool, quiet: bool) -> None:
    """Rewrite PATHS (files or folders) so tensors, models and batches share one device.

    Folders are searched for *.py and *.ipynb (notebooks: the code cells are
    rewritten as one program, IPython lines kept as they are), skipping .git, virtual/conda/pixi
    environments, site-packages, __pycache__, build/, dist/ and what .gitignore excludes. Files that do not use torch are never
    touched. Settings come from [tool.devmod] in the nearest pyproject.toml;
    flags override them.

    \b
    Exit status: 0 done; 1 --check found changes or unfixed findings;
    2 a file could not be processed (named on stderr with line and reason)
    or the command line was wrong; 130 interrupted (Ctrl-C, SIGTERM).
    """
    if not paths:
        raise click.UsageError("give the files or folders to rewrite, e.g. `devmod apply --diff .`")
    if show_diff and check:
        raise click.UsageError("--diff and --check cannot be combined; --check already writes nothing")
    if interactive and (show_diff or check or output_format not in ("text", "github")):
        raise click.UsageError("--interactive writes the fixes you accept; it cannot be combined with "
                               "--diff, --check or --format json/rdjson/sarif")
    if interactive and not sys.stdin.isatty():
        raise click.UsageError("--interactive needs a terminal to ask in; use --diff to review in a pipe")
    if device_name is not None and (problem := name_problem(device_name)):
        raise click.BadParameter(problem, param_hint="--device-name")
    try:
        config = load_config(find_pyproject(paths), list(rule_codes()))
    except ConfigError as exc:
        click.echo(f"devmod: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    config = config.with_overrides(select=select or None, ignore=(config.ignore + ignore) if ignore else None,
                                   unsafe_fixes=unsafe_fixes, device_name=device_name, device_style=device_style)
    mode = "diff" if show_diff or output_format in ("rdjson", "sarif") else "check" if check else "write"
    # pyproject.toml globs are relative to its folder, so they mean the same from any working
    # directory; --exclude globs (bare strings) are relative to the current directory.
    project_dir = os.path.dirname(config.source) if config.source else os.getcwd()
    excludes: list[Exclude] = [(project_dir, glob) for glob in config.exclude]
    excludes.extend(exclude)
    try:  # walking a large tree takes seconds: a signal there is 130 too, never click's "Aborted!" (exit 1)
        with stop_on_signals():
            files = list(iter_python_files(paths, excludes, force_exclude=force_exclude,
                                           warn=lambda message: click.echo(f"devmod: warning: {message}", err=True)))
    except Interrupted as exc:
        click.echo(interrupted_message(exc, mode), err=True)
        sys.exit(EXIT_INTERRUPTED)
    if interactive:
        from .interactive import Session, review_files
        session = Session()
        try:  # Ctrl-C at a prompt (read as a key, raised as KeyboardInterrupt) or SIGTERM: 130, never 1
            with stop_on_signals():
                reports = review_files(files, config, session)
        except (Interrupted, KeyboardInterrupt) as exc:
            stop = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
            click.echo(interrupted_message(stop, "write"), err=True)
            sys.exit(EXIT_INTERRUPTED)
        if session.skipped and not quiet:
            click.echo(f"devmod: {session.skipped} fix{'es' if session.skipped != 1 else ''} skipped at your "
                       "request", err=True)
        files = []  # done: the batch run below has nothing left to do
    from .progress import progress_bar
    cache = None if no_cache else Cache(config)
    reports = reports if interactive else []
    try:
        with stop_on_signals(), open_executor(executor) as pool:
            if files:
                reports.extend(progress_bar(process_files(files, config, mode, jobs, cache=cache, executor=pool),
                                            len(files), enabled=output_format not in ("json", "rdjson", "sarif")))
    except ExecutorError as exc:
        click.echo(f"devmod: error: {exc}", err=True)
        sys.exit(EXIT_ERROR)
    except Interrupted as exc:
        click.echo(interrupted_message(exc, mode), err=True)
        sys.exit(EXIT_INTERRUPTED)
    _print_reports(reports, mode, output_format, verbose, quiet)
    errors = sum(1 for r in reports if r.error)
    if errors:
        sys.exit(EXIT_ERROR)
    if (check or fail_on_findings) and any(r.open_findings for r in reports):
        sys.exit(EXIT_FOUND)
    if check and any(r.changed for r in reports):
        sys.exit(EXIT_FOUND)


def _print_reports(reports: list[FileReport], mode: str, output_format: str, verbose: bool, quiet: bool) -> None:
    if output_format == "json":
        click.echo(json.dumps([_as_json(r) for r in reports], indent=2))
    if output_format == "rdjson":
        from .formats.rdjson import rdjson_document
        click.echo(json.dumps(rdjson_document(reports), indent=2, ensure_ascii=False))
    if output_format == "sarif":
        from .formats.sarif import sarif_document
        click.echo(json.dumps(sarif_document(reports), indent=2, ensure_ascii=False))
    for report in reports:
        if report.error:
            line, column, reason = report.error.split(":", 2)
            where = f"{report.path}:cell-{report.error_cell}" if report.error_cell else report.path
            click.echo(f"{where}:{line}:{column}: error: {reason.strip()}", err=True)
        if output_format in ("json", "rdjson", "sarif"):
            continue
        if report.diff:
            _echo_diff(report.diff)
        if quiet:
            continue
        for finding in report.findings:
            if finding.fixed and not verbose:
                continue
            if output_format == "github" and not finding.fixed and finding.cell is not None:
                from .notebooks import annotation
                click.echo(annotation(report.path, finding))
            elif output_format == "github" and not finding.fixed:
                click.echo(f"::warning file={report.path},line={finding.line},col={finding.column},"
                           f"title={finding.code}::{finding.message}")
            else:
                click.echo(finding.format(report.path), err=True)
        if mode == "check" and report.changed:
            click.echo(f"would rewrite {report.path}", err=True)
    if not quiet:
        click.echo(_summary(reports, mode), err=True)


def _echo_diff(diff: str) -> None:
    for line in diff.splitlines(keepends=True):
        colour = "green" if line.startswith("+") and not line.startswith("+++") else \
            "red" if line.startswith("-") and not line.startswith("---") else \
            "cyan" if line.startswith("@@") else None
        click.echo(click.style(line, fg=colour) if colour else line, nl=False)


def _summary(reports: list[FileReport], mode: str) -> str:
    fixes: Counter = Counter()
    for report in reports:
        fixes.update(report.fix_counts)
    changed = sum(1 for r in reports if r.changed)
    open_findings = sum(len(r.open_findings) for r in reports)
    errors = sum(1 for r in reports if r.error)
    verb = "changed" if mode == "write" else "would change"
    by_rule = ", ".join(f"{code} {n}" for code, n in sorted(fixes.items()))
    return (f"devmod: {len(reports)} files scanned, {changed} {verb}, {sum(fixes.values())} fixes"
            f"{' (' + by_rule + ')' if by_rule else ''}, {open_findings} findings not fixed, "
            f"{errors} error{'s' if errors != 1 else ''}")


def _as_json(report: FileReport) -> dict:
    return {"path": report.path, "changed": report.changed, "error": report.error, "diff": report.diff or None,
            "findings": [dict(code=f.code, name=f.name, cell=f.cell, line=f.line, column=f.column, message=f.message,
                              fixed=f.fixed, safety=f.safety, replacement=f.replacement)
                         for f in report.findings]}


@main.command()
@click.argument("code", required=False)
def rules(code: str | None) -> None:
    """List every rule, or explain one (`devmod rules DM103`)."""
    from .catalogue import explain_rule, rules_table  # late: it imports the rules and libcst
    if code is None:
        click.echo(rules_table())
        return
    text = explain_rule(code)
    if text is None:
        click.echo(f"devmod: error: unknown rule {code!r}; `devmod rules` lists them", err=True)
        sys.exit(EXIT_ERROR)
    click.echo(text)


if __name__ == "__main__":  # pragma: no cover
    main()
