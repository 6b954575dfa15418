"""Ctrl-C, SIGTERM and kill -9 during `devmod apply -j 2` (issue 11).

Before the fix, Ctrl-C printed a traceback and exited 1 (the `--check` answer), and
after kill -9 of the main process the pool workers went on writing files. Now: exit
130 within about a second with the number of files written, every file either the
original or the full rewrite, no temporary file, no process left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codemods.engine import transform_source

ORIGINAL = ("import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
            "        return x\n\nmodel = Net().cuda()\nbatch = torch.zeros(3).cuda()\n") * 4
FILES = 60


def make_tree(root: Path) -> Path:
    tree = root / "tree"
    tree.mkdir()
    for i in range(FILES):
        (tree / f"f{i:03}.py").write_text(ORIGINAL)
    return tree


def start(tree: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "codemods", "apply", "-j", "2", str(tree)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_first_write(tree: Path, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if any(p.read_text() != ORIGINAL for p in tree.iterdir() if p.suffix == ".py"):
            return
        time.sleep(0.05)
    pytest.fail("no file was written in time")


def processes_on(tree: Path) -> list[str]:
    """Processes still running devmod on this tree (workers share the main command line)."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(tree) in cmdline and "codemods" in cmdline:
            found.append(pid)
    return found


def assert_whole(tree: Path) -> int:
    """Every file is the original or the full rewrite; returns how many were rewritten."""
    names = sorted(p.name for p in tree.iterdir())
    assert names == [f"f{i:03}.py" for i in range(FILES)], "a temporary file was left behind"
    texts = [p.read_text() for p in sorted(tree.iterdir())]
    rewritten = [t for t in texts if t != ORIGINAL]
    expected = transform_source(ORIGINAL).output
    assert all(text == expected for text in rewritten)
    return len(rewritten)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL") or not os.path.isdir("/proc"), reason="needs Linux /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_exit_130_quickly_naming_the_files_written(tmp_path, signum):
    tree = make_tree(tmp_path)
    process = start(tree)
    wait_for_first_write(tree, process)
    sent = time.monotonic()
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    took = time.monotonic() - sent
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert took < 3, f"took {took:.1f}s to stop"  # about a second; slack for a loaded CI machine
    written = assert_whole(tree)
    assert f"interrupted by {signal.Signals(signum).name}; {written} file" in stderr
    time.sleep(0.3)
    assert processes_on(tree) == []


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux /proc")
def test_kill_9_of_the_main_process_stops_the_workers(tmp_path):
    tree = make_tree(tmp_path)
    process = start(tree)
    wait_for_first_write(tree, process)
    process.kill()
    process.communicate(timeout=30)
    deadline = time.monotonic() + 3
    while processes_on(tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_on(tree) == []
    written = assert_whole(tree)
    time.sleep(0.5)  # nobody is left to write more
    assert assert_whole(tree) == written


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_tree_is_walked_exits_130_not_1(tmp_path, monkeypatch, signum):
    # Walking a large tree takes seconds. Ctrl-C there used to reach click, which printed
    # "Aborted!" and exited 1: the `--check` answer for "something would change".
    from click.testing import CliRunner

    from codemods import cli

    (tmp_path / "a.py").write_text(ORIGINAL)
    walk = cli.iter_python_files

    def walk_then_signal(*args, **kwargs):
        for path in walk(*args, **kwargs):
            os.kill(os.getpid(), signum)
            yield path
    monkeypatch.setattr(cli, "iter_python_files", walk_then_signal)

    def unhandled(signum, frame):  # SIGTERM's default would end pytest itself
        raise AssertionError("the signal reached no devmod handler")
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        result = CliRunner().invoke(cli.main, ["apply", "--check", "--no-cache", "-j", "1", str(tmp_path)])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert result.exit_code == 130, result.output
    assert f"interrupted by {signal.Signals(signum).name}" in result.stderr
    assert (tmp_path / "a.py").read_text() == ORIGINAL
