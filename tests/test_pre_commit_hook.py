"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit (`pre-commit try-repo`).

try-repo clones the hook repository and pip-installs it into pre-commit's own virtual
environment, as a user's `pre-commit install` would. The repository handed to it is a
fresh git repository holding this working tree's files (tracked and untracked, ignored
ones left out), so the test sees uncommitted work and runs the same from a clean checkout.
One try-repo run installs once and runs both hooks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BAD = "import torch\n\nmodel = Net().cuda()\nx = torch.zeros(3, device=\"cuda:0\")\n"
GOOD = "import torch\n\ndevice = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")\n"
REPORT_ONLY = "import torch\n\nx = y.cuda(0)\n"  # `.cuda(index)` is reported, never fixed


def git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env).stdout


def _working_tree_files() -> list[str]:
    if (ROOT / ".git").exists():
        listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT)
        return [p for p in listed.split("\0") if p and (ROOT / p).is_file()]
    return [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()
            and not {".venv", ".git", "__pycache__"} & set(p.relative_to(ROOT).parts)]


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("devmod-hooks")
    for name in _working_tree_files():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    git("init", "-q", cwd=repo)
    git("add", "-A", cwd=repo)
    git("commit", "-q", "-m", "devmod", cwd=repo)
    return repo


def test_manifest_declares_both_hooks():
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"devmod", "devmod-check"}
    assert hooks["devmod"]["entry"].startswith("devmod apply") and "--check" not in hooks["devmod"]["entry"]
    assert hooks["devmod-check"]["entry"] == "devmod apply --check"
    for hook in hooks.values():
        assert hook["language"] == "python" and hook["types_or"] == ["python", "jupyter"]


def test_try_repo_blocks_a_commit_with_cuda_and_rewrites_it(hook_repo, tmp_path):
    work = tmp_path / "project"
    work.mkdir()
    git("init", "-q", cwd=work)
    (work / "train.py").write_text(BAD)
    (work / "clean.py").write_text(GOOD)
    (work / "legacy.py").write_text(REPORT_ONLY)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import torch"),
                                               nbformat.v4.new_code_cell("net = Net().cuda()")])
    nbformat.write(notebook, str(work / "colab.ipynb"))
    git("add", "train.py", "clean.py", "legacy.py", "colab.ipynb", cwd=work)
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "cache"), PRE_COMMIT_COLOR="never")
    env.pop("VIRTUAL_ENV", None)
    result = subprocess.run([sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo),
                             "--files", "train.py", "clean.py", "legacy.py", "colab.ipynb", "--verbose"],
                            cwd=work, capture_output=True, text=True, env=env, timeout=600)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out  # the commit is blocked
    lines = {line.split(".", 1)[0]: line for line in out.splitlines() if line.startswith("devmod (")}
    assert lines["devmod (fix device placement)"].endswith("Failed"), out
    assert "- files were modified by this hook" in out
    assert "legacy.py:3:5: DM103" in out  # the finding it cannot fix is shown
    fixed = (work / "train.py").read_text()
    assert "model = Net().to(device)" in fixed and "device=device" in fixed and ".cuda()" not in fixed
    assert (work / "clean.py").read_text() == GOOD
    cells = nbformat.read(str(work / "colab.ipynb"), as_version=4).cells  # types_or includes jupyter
    assert "".join(c.source for c in cells).count(".to(device)") == 1
    # devmod-check runs after the fix on the rewritten files: it fails only for the finding left.
    assert lines["devmod (check device placement)"].endswith("Failed"), out
    assert "would rewrite" not in out.split("devmod (check device placement)", 1)[1]


def test_fail_on_findings_and_its_opt_out(tmp_path):
    """The hook's entry passes --fail-on-findings; `args: [--no-fail-on-findings]` comes after it and wins."""
    (tmp_path / "legacy.py").write_text(REPORT_ONLY)
    base = [sys.executable, "-m", "codemods", "apply", "--fail-on-findings", str(tmp_path / "legacy.py")]
    assert subprocess.run(base, capture_output=True, timeout=120).returncode == 1
    assert subprocess.run(base + ["--no-fail-on-findings"], capture_output=True, timeout=120).returncode == 0
