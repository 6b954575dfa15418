"""The progress bar: drawn on a terminal (pseudo-terminal here), never in pipes or --format json.

DEVMOD_PROGRESS_DELAY=0 stands in for a run of more than a second, so the tests stay short."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

FILE = "import torch\n\nmodel = Net().cuda()\n"
BAR = "devmod:"  # tqdm's description, followed by "NN%|" and the bar


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for number in range(6):
        (tmp_path / f"m{number}.py").write_text(FILE)
    return tmp_path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TERM")}
    return dict(env, DEVMOD_PROGRESS_DELAY="0", TERM="xterm", **extra)


def on_terminal(*args: str) -> str:
    child = pexpect.spawn(sys.executable, ["-m", "codemods", *args], env=_env(), encoding="utf-8", timeout=120)
    child.expect(pexpect.EOF)
    child.close()
    return child.before


def test_a_terminal_shows_the_bar(folder):
    out = on_terminal("apply", "--check", "-j", "1", str(folder))
    assert "%|" in out and "/6 [" in out and "file" in out, out
    assert "devmod: 6 files scanned" in out  # the summary still comes after it


def test_pipes_get_no_bar(folder):
    result = subprocess.run([sys.executable, "-m", "codemods", "apply", "--check", "-j", "1", str(folder)],
                            capture_output=True, text=True, env=_env(), timeout=120)
    assert result.returncode == 1
    assert "%|" not in result.stderr and "\r" not in result.stderr and "\x1b" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith("devmod: 6 files scanned")


def test_json_and_ci_get_no_bar_even_on_a_terminal(folder):
    assert "%|" not in on_terminal("apply", "--check", "--format", "json", "-j", "1", str(folder))
    child = pexpect.spawn(sys.executable, ["-m", "codemods", "apply", "--check", "-j", "1", str(folder)],
                          env=_env(CI="true"), encoding="utf-8", timeout=120)
    child.expect(pexpect.EOF)
    assert "%|" not in child.before
