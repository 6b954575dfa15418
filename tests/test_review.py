"""`devmod review` against a real git repository and a local GitHub stand-in (tests/github_server.py).

The repository is built in a temporary folder: a base commit, and a head commit that adds a
`.cuda()` model, a training loop that never moves its batch and a global CUDA default. Every
request body the bot sends is checked against githubkit's models of GitHub's API.
"""

from __future__ import annotations

import base64
import json
import subprocess

import pytest
from click.testing import CliRunner

from codemods.cli import main
from codemods.review import command
from codemods.review.github_client import Client, RetryPolicy
from github_server import FakeGitHub, Fault

BASE = '''import torch
import torch.nn as nn


def evaluate(model, data):
    out = model(data)
    return out


def helper():
    return 1


def more():
    return 2


def build():
    return nn.Linear(4, 2)
'''

ADDED = '''

model = build().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)


loader = torch.utils.data.DataLoader(dataset, batch_size=8)
for x, y in loader:
    loss = (model(x) - y).pow(2).mean()
    loss.backward()


torch.set_default_tensor_type("torch.cuda.FloatTensor")
'''
HEAD = BASE + ADDED  # lines 22 (.cuda()), 27 (the loop) and 32 (the default type) are the PR's


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def pr_repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "dev@example.com")
    git(repo, "config", "user.name", "dev")
    (repo / "train.py").write_text(BASE)
    (repo / "notes.md").write_text("notes\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    (repo / "train.py").write_text(HEAD)
    (repo / "plain.py").write_text("print('no torch here')\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "head: train on the GPU")
    return repo, base, git(repo, "rev-parse", "HEAD")


@pytest.fixture
def github():
    server = FakeGitHub().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    def make(target):
        return Client(target.token, target.api_url, target.owner, target.repo,
                      retry=RetryPolicy(retries=3, backoff=0.01), timeout=5)
    monkeypatch.setattr(command, "make_client", make)


def run_review(repo, github, base, head, *extra: str, number: int = 7, token: str | None = "test-token",
               event: bool = True, tmp_path=None):
    env = {"GITHUB_REPOSITORY": "acme/trainer", "GITHUB_API_URL": github.url, "GITHUB_EVENT_PATH": "",
           "GITHUB_TOKEN": token or "", "GH_TOKEN": ""}
    github.pulls.setdefault(number, {"number": number, "state": "open", "base": {"sha": base, "ref": "main"},
                                     "head": {"sha": head, "ref": "gpu"}})
    if event:
        path = repo.parent / "event.json"
        path.write_text(json.dumps({"number": number, "pull_request": {
            "number": number, "base": {"sha": base, "ref": "main"}, "head": {"sha": head, "ref": "gpu"}}}))
        env["GITHUB_EVENT_PATH"] = str(path)
    result = CliRunner().invoke(main, ["review", "--checkout", str(repo), *extra], env=env, catch_exceptions=False)
    return result


def suggestion(code: str) -> str:
    return f"```suggestion\n{code}```"


def test_one_review_with_exact_suggestions_and_out_of_diff_fallback(pr_repo, github):
    repo, base, head = pr_repo
    result = run_review(repo, github, base, head)
    assert result.exit_code == 0, result.output
    assert github.invalid == []
    reviews = github.posted_reviews()
    assert len(reviews) == 1
    review = reviews[0]
    assert review["event"] == "COMMENT" and review["commit_id"] == head
    comments = review["comments"]
    assert [(c["path"], c.get("start_line"), c["line"], c["side"]) for c in comments] == [
        ("train.py", None, 22, "RIGHT"), ("train.py", None, 27, "RIGHT"), ("train.py", None, 32, "RIGHT")]
    cuda, loop, default = (c["body"] for c in comments)
    assert suggestion("model = build().to(device)\n") in cuda
    assert "DM103 cuda-call](https://github.com/devmod/devmod/blob/main/docs/rules.md#dm103-cuda-call)" in cuda
    assert "Prevents `AssertionError: Torch not compiled with CUDA enabled`" in cuda
    assert suggestion("for x, y in loader:\n    x, y = x.to(device), y.to(device)\n") in loop
    assert "DM203 batch-to-device" in loop and "Expected all tensors to be on the same device" in loop
    assert "```suggestion" not in default and "DM402 default-tensor-type" in default  # report only: plain
    for body in (cuda, loop, default):
        assert body.count("<!-- devmod:") == 1
    # The shared device goes after the imports, outside the PR's diff: folded into the body.
    body = review["body"]
    assert body.startswith("**devmod** review: 2 files scanned, 1 would change, 3 fixes "
                           "(DM101 1, DM103 1, DM203 1), 1 findings not fixed, 0 errors")
    assert "<details><summary>DM101 in <code>train.py</code> (after line 2)</summary>" in body
    assert '+device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n' in body
    assert "<!-- devmod:DM101:train.py:" in body
    assert "devmod: posted https://github.test/acme/trainer/pull/7#pullrequestreview-" in result.output


def test_second_run_posts_nothing_twice_and_reports_outdated(pr_repo, github):
    repo, base, head = pr_repo
    assert run_review(repo, github, base, head).exit_code == 0
    again = run_review(repo, github, base, head)
    assert again.exit_code == 0
    assert len(github.posted_reviews()) == 1
    assert "nothing new to post (4 already on the pull request)" in again.output
    # The author commits the `.cuda()` suggestion (and the device) by hand and pushes.
    text = (repo / "train.py").read_text().replace("build().cuda()", "build().to(device)")
    text = text.replace("import torch.nn as nn\n", "import torch.nn as nn\n\ndevice = torch.device('cpu')\n", 1)
    (repo / "train.py").write_text(text)
    git(repo, "commit", "-qam", "apply suggestion")
    new_head = git(repo, "rev-parse", "HEAD")
    github.pulls[7]["head"]["sha"] = new_head
    third = run_review(repo, github, base, new_head)
    assert third.exit_code == 0, third.output
    assert github.invalid == []
    reviews = github.posted_reviews()
    assert len(reviews) == 2
    latest = reviews[-1]
    assert "earlier suggestions no longer apply" in latest["body"]
    assert "- DM103 in `train.py` <!-- devmod-outdated:DM103:train.py:" in latest["body"]
    assert "- DM101 in `train.py`" in latest["body"]  # the file now defines its own device
    # The loop and the default type were posted before and are unchanged: not repeated.
    assert latest["comments"] == []
    fourth = run_review(repo, github, base, new_head)
    assert "nothing new to post" in fourth.output and len(github.posted_reviews()) == 2


def test_422_on_one_comment_moves_only_that_one_into_the_body(pr_repo, github):
    repo, base, head = pr_repo
    github.refuse_lines = {("train.py", 27)}
    result = run_review(repo, github, base, head)
    assert result.exit_code == 0, result.output
    assert github.invalid == []
    reviews = github.posted_reviews()
    assert len(reviews) == 1
    assert [c["line"] for c in reviews[0]["comments"]] == [22, 32]
    body = reviews[0]["body"]
    assert "DM203 in <code>train.py</code> (after line 27) (GitHub refused a comment on these lines)" in body
    assert "+    x, y = x.to(device), y.to(device)\n" in body
    assert not [r for r in github.reviews if r["state"] == "PENDING"]  # probes were deleted
    assert "finding the comments it rejects" in result.output


def test_5xx_is_retried_then_the_review_posts(pr_repo, github):
    repo, base, head = pr_repo
    github.faults.append(Fault("POST", r"/reviews$", 502, times=2))
    result = run_review(repo, github, base, head)
    assert result.exit_code == 0, result.output
    assert len(github.posted_reviews()) == 1
    assert sum(1 for m, p, _ in github.requests if m == "POST" and p.endswith("/reviews")) == 3


def test_persistent_5xx_is_reported_and_the_review_printed(pr_repo, github):
    repo, base, head = pr_repo
    github.faults.append(Fault("POST", r"/reviews$", 503, times=10, body={"message": "Service Unavailable"}))
    result = run_review(repo, github, base, head)
    assert result.exit_code == 2
    assert "GitHub answered 503 (Service Unavailable) after retries" in result.output
    printed = json.loads(result.output[result.output.index("{"):])
    assert len(printed["comments"]) == 3  # nothing lost: the whole review is in the log


def test_403_says_which_permission(pr_repo, github):
    repo, base, head = pr_repo
    github.faults.append(Fault("POST", r"/reviews$", 403, body={"message": "Resource not accessible by integration"}))
    result = run_review(repo, github, base, head)
    assert result.exit_code == 2
    assert "403 (Resource not accessible by integration)" in result.output
    assert "pull-requests: write" in result.output


def test_rate_limit_is_reported_with_its_reset_time(pr_repo, github):
    repo, base, head = pr_repo
    github.faults.append(Fault("GET", r"/comments$", 403, times=5, body={"message": "API rate limit exceeded"},
                               headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": "4102444800"}))
    result = run_review(repo, github, base, head)
    assert result.exit_code == 2
    assert "rate limit is exhausted until 00:00:00 UTC" in result.output


def test_without_token_a_clear_error(pr_repo, github):
    repo, base, head = pr_repo
    result = run_review(repo, github, base, head, token=None)
    assert result.exit_code == 2
    assert "devmod: error: no GitHub token: set GITHUB_TOKEN" in result.output
    assert github.requests == []


def test_dry_run_prints_exactly_what_is_sent(pr_repo, github, tmp_path):
    repo, base, head = pr_repo
    dry = run_review(repo, github, base, head, "--dry-run")
    assert dry.exit_code == 0
    assert not [r for r in github.requests if r[0] != "GET"]  # sends nothing
    printed = json.loads(dry.stdout)
    run_review(repo, github, base, head)
    assert github.posted_reviews() == [printed]


def test_fail_on_findings_requests_changes(pr_repo, github):
    repo, base, head = pr_repo
    result = run_review(repo, github, base, head, "--fail-on-findings")
    assert result.exit_code == 1
    assert github.posted_reviews()[0]["event"] == "REQUEST_CHANGES"


def test_flags_instead_of_the_event_and_an_enterprise_api_prefix(pr_repo):
    repo, base, head = pr_repo
    server = FakeGitHub(prefix="/api/v3").start()
    try:
        result = run_review(repo, server, base, head, "--repo", "acme/trainer", "--pr", "7", "--select", "DM103",
                            event=False)
        assert result.exit_code == 0, result.output
        assert server.invalid == []
        review = server.posted_reviews()[0]
        assert [c["line"] for c in review["comments"]] == [22]  # --select: only DM103 (with its device)
        assert all(p.startswith("/api/v3/repos/acme/trainer/") for _, p, _ in server.requests)
    finally:
        server.stop()


def test_comments_stay_inside_githubs_diff(pr_repo, github):
    """The server refuses lines outside the diff as GitHub does: nothing is refused."""
    repo, base, head = pr_repo
    diff = git(repo, "diff", "-U3", f"{base}...{head}", "--", "train.py")
    from codemods.review.gitdiff import parse_hunk_ranges
    github.diff_lines = {"train.py": {n for lo, hi in parse_hunk_ranges(diff) for n in range(lo, hi + 1)}}
    assert run_review(repo, github, base, head).exit_code == 0
    assert len(github.posted_reviews()[0]["comments"]) == 3 and github.invalid == []


def test_fix_pr_mode_opens_then_updates_one_pull_request(pr_repo, github):
    repo, base, head = pr_repo
    result = run_review(repo, github, base, head, "--mode", "fix-pr", "--base", "main", event=False)
    assert result.exit_code == 0, result.output
    assert github.invalid == []
    (ref, commit_sha), = github.refs.items()
    assert ref == "refs/heads/devmod/fixes"
    commit = github.commits[commit_sha]
    assert commit["parents"] == [head]
    (entry,) = github.trees[commit["tree"]]
    assert entry["path"] == "train.py" and entry["mode"] == "100644"
    from codemods.engine import transform_source
    assert github.blobs[entry["sha"]].decode() == transform_source(HEAD).output
    pull = [p for p in github.pulls.values() if p["head"]["ref"] == "devmod/fixes"][0]
    assert pull["base"]["ref"] == "main"
    assert "| [DM103](https://github.com/devmod/devmod/blob/main/docs/rules.md#dm103-cuda-call) | 1 | `train.py` (1) |" \
        in pull["body"]
    assert "`train.py:35` [DM402]" in pull["body"]  # a line of the fixed file, as the PR shows it
    again = run_review(repo, github, base, head, "--mode", "fix-pr", "--base", "main", event=False)
    assert again.exit_code == 0, again.output
    assert len([p for p in github.pulls.values() if p["head"]["ref"] == "devmod/fixes"]) == 1
    assert any(m == "PATCH" and p.endswith("/git/refs/heads/devmod/fixes") for m, p, _ in github.requests)
    assert github.invalid == []


def test_fix_pr_dry_run_sends_nothing(pr_repo, github):
    repo, base, head = pr_repo
    result = run_review(repo, github, base, head, "--mode", "fix-pr", "--base", "main", "--dry-run", event=False)
    assert result.exit_code == 0
    requests = json.loads(result.stdout)
    assert [r["path"] for r in requests] == ["git/blobs", "git/trees", "git/commits", "git/refs", "pulls"]
    assert base64.b64decode(requests[0]["body"]["content"]).decode().count("to(device)") == 3
    assert github.requests == []


def test_server_validation_catches_a_bad_body(github):
    """The stand-in must be able to fail: a malformed review is refused and recorded."""
    client = Client("test-token", github.url, "acme", "trainer", retry=RetryPolicy(retries=0))
    github.pulls[1] = {"number": 1}
    with pytest.raises(Exception):
        client.github.request("POST", "/repos/acme/trainer/pulls/1/reviews",
                              json={"event": "COMMENT", "comments": [{"path": "a.py", "line": "3", "body": "x"}]})
    with pytest.raises(Exception):
        client.github.request("POST", "/repos/acme/trainer/pulls/1/reviews", json={"event": "COMMENT", "bogus": 1})
    assert len(github.invalid) == 2


MORE = '''

net = build()
if torch.cuda.is_available():
    net = net.cuda()


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.parts = [nn.Linear(2, 2), nn.Linear(2, 2)]
'''


def test_a_multi_line_fix_and_an_unsafe_fix(pr_repo, github):
    repo, base, _ = pr_repo
    (repo / "train.py").write_text(HEAD + MORE)
    git(repo, "commit", "-qam", "more")
    head = git(repo, "rev-parse", "HEAD")
    assert run_review(repo, github, base, head).exit_code == 0
    assert github.invalid == []
    comments = {c["line"]: c for c in github.posted_reviews()[0]["comments"]}
    guard = comments[37]  # lines 36-37: the CUDA guard collapses into one line
    assert (guard["start_line"], guard["start_side"], guard["side"]) == (36, "RIGHT", "RIGHT")
    assert suggestion("net = net.to(device)\n") in guard["body"] and "DM103 cuda-call" in guard["body"]
    unsafe = comments[43]
    assert "start_line" not in unsafe and "DM305 module-container" in unsafe["body"]
    assert "**Unsafe fix**" in unsafe["body"]
    assert suggestion("        self.parts = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])\n") in unsafe["body"]
    assert "**Unsafe fix**" not in comments[22]["body"]


def test_a_file_that_cannot_be_parsed_is_reported_once(pr_repo, github):
    repo, base, _ = pr_repo
    (repo / "broken.py").write_text("import torch\ndef f(:\n")
    git(repo, "add", "broken.py")
    git(repo, "commit", "-qm", "broken")
    head = git(repo, "rev-parse", "HEAD")
    first = run_review(repo, github, base, head)
    assert first.exit_code == 2
    assert "broken.py:2:7: error: cannot parse" in first.output
    body = github.posted_reviews()[0]["body"]
    assert "Files devmod could not process:\n- `broken.py`: 2:7: cannot parse" in body
    assert len(github.posted_reviews()[0]["comments"]) == 3  # the other file is still reviewed
    second = run_review(repo, github, base, head)
    assert second.exit_code == 2 and "nothing new to post" in second.output
    assert len(github.posted_reviews()) == 1


def test_a_short_secondary_rate_limit_is_waited_out(pr_repo, github):
    repo, base, head = pr_repo
    github.faults.append(Fault("POST", r"/reviews$", 403, headers={"retry-after": "2"},
                               body={"message": "You have exceeded a secondary rate limit"}))
    result = run_review(repo, github, base, head)
    assert result.exit_code == 0, result.output
    assert len(github.posted_reviews()) == 1
    assert sum(1 for m, p, _ in github.requests if m == "POST" and p.endswith("/reviews")) == 2


def test_a_clean_pull_request_gets_no_review(pr_repo, github):
    repo, base, _ = pr_repo
    clean = transform_source_output(HEAD.replace('torch.set_default_tensor_type("torch.cuda.FloatTensor")\n', ""))
    (repo / "train.py").write_text(clean)
    git(repo, "commit", "-qam", "fixed")
    head = git(repo, "rev-parse", "HEAD")
    assert git(repo, "diff", "--stat", f"{base}...{head}")  # the PR changes train.py, correctly
    result = run_review(repo, github, base, head)
    assert result.exit_code == 0
    assert "no device problems in this pull request; no review posted" in result.output
    assert github.posted_reviews() == []


def transform_source_output(text: str) -> str:
    from codemods.engine import transform_source
    return transform_source(text).output
