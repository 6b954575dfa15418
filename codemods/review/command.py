"""`devmod review`: the click command behind the GitHub Action."""

from __future__ import annotations

import json
import os
import sys

import click

from ..config import ConfigError, find_pyproject, load_config
from .errors import GitHubApiError
from .event import EventError, Target, environment, read_target
from .gitdiff import GitError, git, resolve
from . import RULES_DOC_URL  # the engine and its rules are imported only when a review runs

EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2


def make_client(target: Target):
    """The GitHub client (a function so tests can shorten its retry waits)."""
    try:
        from .github_client import Client
    except ImportError as exc:
        _fail(str(exc))
    return Client(target.token or "", target.api_url, target.owner, target.repo)


def _codes(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    from ..cli import _codes as cli_codes
    return cli_codes(ctx, param, value)


def _fail(message: str) -> None:
    click.echo(f"devmod: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--mode", type=click.Choice(["review", "fix-pr"]), default="review", show_default=True,
              help="review: one review with suggestions on the PR; fix-pr: open a PR with one commit of fixes.")
@click.option("--repo", metavar="OWNER/NAME", help="Repository (default: GITHUB_REPOSITORY).")
@click.option("--pr", type=int, metavar="NUMBER", help="Pull request number (default: from GITHUB_EVENT_PATH).")
@click.option("--base", metavar="REV", help="Base commit of the PR (default: from the event or the API); "
              "in fix-pr mode the branch the fix PR targets.")
@click.option("--head", metavar="REV", help="Head commit of the PR (default: from the event or the API).")
@click.option("--checkout", default=".", show_default=True, type=click.Path(exists=True, file_okay=False),
              help="The local git checkout of the repository.")
@click.option("--select", multiple=True, callback=_codes, metavar="CODES", help="Only these rule codes or prefixes.")
@click.option("--ignore", multiple=True, callback=_codes, metavar="CODES", help="Skip these rule codes or prefixes.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files whose path or a folder name matches.")
@click.option("--fail-on-findings", is_flag=True,
              help="Post the review as REQUEST_CHANGES and exit 1 when devmod has anything to say.")
@click.option("--dry-run", is_flag=True, help="Print the exact JSON that would be sent; send nothing.")
@click.option("--docs-url", default=RULES_DOC_URL, show_default=True, help="Where rule links point.")
def review(paths: tuple[str, ...], mode: str, repo: str | None, pr: int | None, base: str | None,
           head: str | None, checkout: str, select: tuple[str, ...], ignore: tuple[str, ...],
           exclude: tuple[str, ...], fail_on_findings: bool, dry_run: bool, docs_url: str) -> None:
    """Review a pull request: each fix becomes a one-click suggestion (for CI bots).

    Reads the PR from the GitHub Actions environment (GITHUB_EVENT_PATH, GITHUB_REPOSITORY,
    GITHUB_TOKEN, GITHUB_API_URL for GitHub Enterprise) or from --repo/--pr/--base/--head,
    runs devmod on the Python files the PR changes (optionally only under PATHS) at the head
    commit, and posts ONE review. Fixes outside the PR's diff go into the review body.
    Re-runs post nothing twice. `--mode fix-pr` instead opens a pull request with one commit
    of `devmod apply` over PATHS (default: the whole checkout).

    \b
    Exit status: 0 posted (or nothing new); 1 --fail-on-findings and devmod found something;
    2 no token, a GitHub or git error, or a file could not be processed.
    """
    try:
        target = read_target(environment(), repo, pr, base, head)
        root = git(checkout, "rev-parse", "--show-toplevel").decode().strip()
    except (EventError, GitError) as exc:
        _fail(str(exc))
    if not target.token and not dry_run:
        _fail("no GitHub token: set GITHUB_TOKEN (in a workflow: `env: GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}`), "
              "or use --dry-run to print the review without sending it")
    from ..rules import all_rules
    try:
        config = load_config(find_pyproject([root]), [r.CODE for r in all_rules()])
    except ConfigError as exc:
        _fail(str(exc))
    config = config.with_overrides(select=select or None, ignore=(config.ignore + ignore) if ignore else None)
    project_dir = os.path.dirname(config.source) if config.source else root
    if mode == "fix-pr":
        _fix_pr(target, root, list(paths), config, [(project_dir, g) for g in config.exclude] + list(exclude),
                dry_run, docs_url)
        return
    # A reviewer decides on each suggestion, so unsafe fixes are offered too, marked as unsafe.
    config = config.with_overrides(unsafe_fixes=True)
    _review(target, root, list(paths), config, list(config.exclude) + list(exclude), fail_on_findings,
            dry_run, docs_url)


def _review(target: Target, root: str, paths: list[str], config, excludes: list[str], fail_on_findings: bool,
            dry_run: bool, docs_url: str) -> None:
    from .runner import analyse_pull, build_plan, post_review, posted_texts
    client = None
    try:
        if (target.base is None or target.head is None) and target.number is not None and target.token:
            client = make_client(target)
            pull = client.pull(target.number)
            target.base = target.base or pull["base"]["sha"]
            target.head = target.head or pull["head"]["sha"]
        if target.base is None:
            _fail("which pull request? pass --pr NUMBER (with a token) or --base REV --head REV; "
                  "in GitHub Actions run on a pull_request event")
        head = resolve(root, target.head or "HEAD")
        analysis = analyse_pull(root, target.base, head, config, paths, excludes)
        texts: list[str] = []
        if target.number is not None and target.token:
            client = client or make_client(target)
            texts = posted_texts(client, target.number)
        elif dry_run:
            click.echo("devmod: no token or PR number: earlier comments not read, so nothing is skipped", err=True)
        plan = build_plan(analysis, texts, docs_url)
    except GitError as exc:
        _fail(str(exc))
    except GitHubApiError as exc:
        _fail(str(exc))
    for result in analysis.results:
        if result.error:
            line, column, reason = result.error.split(":", 2)
            click.echo(f"{result.path}:{line}:{column}: error: {reason.strip()}", err=True)
    click.echo(plan.summary, err=True)
    from .payload import review_request
    request = review_request(plan, head, fail_on_findings)
    already = len(plan.posted & {e.key for e in plan.entries})
    if not plan.worth_posting and not plan.entries and not plan.errors:
        click.echo("devmod: no device problems in this pull request; no review posted", err=True)
    elif not plan.worth_posting:
        click.echo(f"devmod: nothing new to post ({already} already on the pull request)", err=True)
    elif dry_run:
        where = f"{target.api_url}/repos/{target.full_name}/pulls/{target.number or '<number>'}/reviews"
        click.echo(f"devmod: dry run: would POST {where} with:", err=True)
        click.echo(json.dumps(request, indent=2, ensure_ascii=False))
    else:
        if target.number is None:
            _fail("which pull request? pass --pr NUMBER (in GitHub Actions: run on a pull_request event)")
        client = client or make_client(target)
        try:
            posted = post_review(client, target.number, plan, head, fail_on_findings,
                                 log=lambda m: click.echo(m, err=True))
        except GitHubApiError as exc:
            click.echo(f"devmod: error: {exc}", err=True)
            click.echo("devmod: the review that could not be posted:", err=True)
            click.echo(json.dumps(request, indent=2, ensure_ascii=False))
            sys.exit(EXIT_ERROR)
        inline = len(posted.request["comments"])
        url = (posted.review or {}).get("html_url") or f"review {(posted.review or {}).get('id')}"
        click.echo(f"devmod: posted {url}: {inline} comment{'s' if inline != 1 else ''}, "
                   f"{len(plan.new) - inline} in the body ({len(posted.moved)} refused by GitHub), "
                   f"{len(plan.outdated)} outdated, {already} already posted", err=True)
    if plan.errors:
        sys.exit(EXIT_ERROR)
    if fail_on_findings and plan.entries:
        sys.exit(EXIT_FOUND)


def _fix_pr(target: Target, root: str, paths: list[str], config, excludes: list, dry_run: bool,
            docs_url: str) -> None:
    from .fixpr import open_fix_pr, pr_body, requests_for, sweep
    from .runner import summary_line
    base_ref = target.base or target.base_ref
    if not base_ref:
        _fail("which branch should the fix pull request target? pass --base BRANCH")
    try:
        head = resolve(root, target.head or "HEAD")
    except GitError as exc:
        _fail(str(exc))
    result = sweep(root, paths, config, excludes)
    summary = summary_line(result.reports)
    click.echo(summary, err=True)
    if not result.changed:
        click.echo("devmod: nothing to fix; no pull request opened", err=True)
        sys.exit(EXIT_ERROR if any(r.error for r in result.reports) else EXIT_OK)
    body = pr_body(result, summary, docs_url)
    if dry_run:
        click.echo(f"devmod: dry run: would send these requests to {target.api_url}/repos/{target.full_name}/",
                   err=True)
        click.echo(json.dumps(requests_for(result, head, base_ref, body), indent=2, ensure_ascii=False))
        return
    try:
        pull = open_fix_pr(make_client(target), result, head, base_ref, body)
    except GitHubApiError as exc:
        _fail(str(exc))
    click.echo(f"devmod: fix pull request: {pull.get('html_url') or '#' + str(pull.get('number'))} "
               f"({len(result.changed)} files)", err=True)
    if any(r.error for r in result.reports):
        sys.exit(EXIT_ERROR)
