"""The README's workflow and action.yml, run as GitHub Actions would run them, against the local stand-in.

The steps' shell commands are taken from the files themselves and run with bash in a real git
checkout, with the variables Actions sets (GITHUB_EVENT_PATH, GITHUB_REPOSITORY, GITHUB_API_URL
and the token), so the documented setup is what is tested.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import yaml

from test_review import git, github, pr_repo  # noqa: F401  (fixtures)

ROOT = pathlib.Path(__file__).resolve().parent.parent


def readme_workflow() -> dict:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "devmod review" in b]
    assert len(blocks) == 1
    return yaml.safe_load(blocks[0])


def actions_env(repo: pathlib.Path, server, base: str, head: str, token: str = "test-token") -> dict:
    event = repo.parent / "event.json"
    event.write_text(json.dumps({"number": 7, "pull_request": {
        "number": 7, "base": {"sha": base, "ref": "main"}, "head": {"sha": head, "ref": "gpu"}}}))
    server.pulls[7] = {"number": 7, "state": "open", "base": {"sha": base}, "head": {"sha": head}}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_"))}
    env.update(GITHUB_EVENT_PATH=str(event), GITHUB_REPOSITORY="acme/trainer", GITHUB_API_URL=server.url,
               PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    return env


def test_the_readme_workflow_posts_the_review(pr_repo, github):  # noqa: F811
    repo, base, head = pr_repo
    workflow = readme_workflow()
    assert workflow["permissions"]["pull-requests"] == "write"
    steps = workflow["jobs"]["review"]["steps"]
    checkout = steps[0]
    assert checkout["uses"].startswith("actions/checkout@") and checkout["with"]["fetch-depth"] == 0
    (step,) = [s for s in steps if "devmod review" in s.get("run", "")]
    env = actions_env(repo, github, base, head)
    env.update({k: v.replace("${{ secrets.GITHUB_TOKEN }}", "test-token") for k, v in step["env"].items()})
    done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1, done.stderr  # --fail-on-findings: the check fails
    assert github.invalid == []
    (review,) = github.posted_reviews()
    assert review["event"] == "REQUEST_CHANGES"
    assert [c["line"] for c in review["comments"]] == [22, 27, 32]
    assert "devmod: posted https://github.test/acme/trainer/pull/7#pullrequestreview-" in done.stderr


def test_the_action_passes_its_inputs(pr_repo, github):  # noqa: F811
    repo, base, head = pr_repo
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    assert {"mode", "paths", "select", "ignore", "fail-on-findings"} <= set(action["inputs"])
    assert action["runs"]["using"] == "composite"
    install, run = action["runs"]["steps"][-2:]
    assert '[review]' in install["run"]
    inputs = {name: spec.get("default", "") for name, spec in action["inputs"].items()}
    inputs.update({"token": "test-token", "select": "DM103", "paths": "train.py notes.md"})
    env = actions_env(repo, github, base, head)
    for key, value in run["env"].items():
        env[key] = re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda m: inputs[m.group(1)], value)
    done = subprocess.run(["bash", "-e", "-c", run["run"]], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    (review,) = github.posted_reviews()
    assert review["event"] == "COMMENT"
    assert [c["line"] for c in review["comments"]] == [22]  # only DM103 selected
    assert github.invalid == []
