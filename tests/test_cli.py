"""The `devmod apply` command-line contract: output streams, exit codes, flags.

Most tests run a real subprocess (``python -m codemods`` or the ``devmod`` console
script) because that is what CI and users run; a few use click's CliRunner for speed.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from codemods.cli import main

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;]*m")
NEEDS_FIX = "import torch\n\nmodel = Net().cuda()\nx = torch.zeros(3, device=\"cuda:0\")\n"
CLEAN = "import torch\n\ndef f(x):\n    return x + 1\n"
REPORT_ONLY = "import torch\n\nx = y.cuda(0)\n"  # DM103 reports `.cuda(index)`, cannot fix it
SUMMARY = re.compile(r"^devmod: (\d+) files scanned, (\d+) (?:changed|would change), (\d+) fixes"
                     r"(?: \(([^)]*)\))?, (\d+) findings not fixed, (\d+) errors?$", re.M)


def devmod(*args: str, cwd: Path | None = None, script: bool = False) -> subprocess.CompletedProcess:
    """Run devmod in a subprocess with pipes (never a terminal)."""
    if script:
        exe = shutil.which("devmod") or str(Path(sys.executable).parent / "devmod")
        command = [exe, *args]
    else:
        command = [sys.executable, "-m", "codemods", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300)


def summary(stderr: str) -> dict:
    match = SUMMARY.search(stderr)
    assert match, f"no summary line in:\n{stderr}"
    scanned, changed, fixes, by_rule, unfixed, errors = match.groups()
    rules = dict(item.split() for item in by_rule.split(", ")) if by_rule else {}
    return dict(scanned=int(scanned), changed=int(changed), fixes=int(fixes),
                by_rule={k: int(v) for k, v in rules.items()}, unfixed=int(unfixed), errors=int(errors))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "train.py").write_text(NEEDS_FIX)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    (tmp_path / "pkg" / "plain.py").write_text("print('no deep learning here')\n")
    return tmp_path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# -- --diff ------------------------------------------------------------------------------------------

def test_diff_prints_unified_diff_to_stdout_and_writes_nothing(project):
    before = snapshot(project)
    result = devmod("apply", "--diff", str(project))
    assert result.returncode == 0, result.stderr
    assert snapshot(project) == before
    out = result.stdout
    assert "--- a/" in out and "+++ b/" in out and "@@ " in out
    assert "-model = Net().cuda()\n" in out and "+model = Net().to(device)\n" in out
    assert "clean.py" not in out and "plain.py" not in out
    assert not ANSI.search(out), "colour codes in piped output"
    assert not ANSI.search(result.stderr)
    assert "--- a/" not in result.stderr  # the diff goes to stdout only


def test_diff_applies_with_patch_semantics(project, tmp_path):
    """The diff is a real unified diff: applying it gives what `apply` writes."""
    result = devmod("apply", "--diff", str(project / "pkg" / "train.py"))
    new_lines = [line[1:] for line in result.stdout.splitlines(keepends=True)
                 if line.startswith((" ", "+")) and not line.startswith("+++")]
    devmod("apply", str(project / "pkg" / "train.py"))
    assert "".join(new_lines) == (project / "pkg" / "train.py").read_text()


def test_diff_is_coloured_only_on_a_terminal(project):
    """Under a pseudo-terminal the diff is coloured; piped (test above) it is not."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "codemods", "apply", "--diff", str(project)],
                            stdout=follower, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            data = os.read(leader, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    out = b"".join(chunks).decode()
    assert proc.returncode == 0
    assert "+model = Net().to(device)" in out
    assert ANSI.search(out), "no colour on a terminal"


# -- --check -----------------------------------------------------------------------------------------

def test_check_exits_1_when_a_file_would_change_and_writes_nothing(project):
    before = snapshot(project)
    result = devmod("apply", "--check", str(project))
    assert result.returncode == 1, result.stderr
    assert snapshot(project) == before
    assert f"would rewrite {project / 'pkg' / 'train.py'}" in result.stderr
    assert result.stdout == ""


def test_check_exits_0_on_clean_code(tmp_path):
    (tmp_path / "clean.py").write_text(CLEAN)
    result = devmod("apply", "--check", str(tmp_path))
    assert result.returncode == 0, result.stderr


def test_check_exits_1_on_unfixed_findings_alone(tmp_path):
    path = tmp_path / "ranked.py"
    path.write_text(REPORT_ONLY)
    result = devmod("apply", "--check", str(path))
    assert result.returncode == 1, result.stderr
    assert f"{path}:3:" in result.stderr and "DM103" in result.stderr
    assert summary(result.stderr)["unfixed"] == 1
    assert path.read_text() == REPORT_ONLY


def test_plain_apply_with_unfixed_findings_exits_0(tmp_path):
    path = tmp_path / "ranked.py"
    path.write_text(REPORT_ONLY)
    assert devmod("apply", str(path)).returncode == 0


# -- apply, summary, jobs ---------------------------------------------------------------------------

def test_apply_rewrites_in_place_and_prints_summary(project):
    result = devmod("apply", str(project), script=True)  # the console script
    assert result.returncode == 0, result.stderr
    assert "model = Net().to(device)" in (project / "pkg" / "train.py").read_text()
    assert (project / "pkg" / "clean.py").read_text() == CLEAN
    counts = summary(result.stderr)
    assert counts["scanned"] == 3 and counts["changed"] == 1 and counts["errors"] == 0
    assert counts["by_rule"].get("DM103") == 1 and counts["by_rule"].get("DM102") == 1
    assert counts["fixes"] == sum(counts["by_rule"].values())
    assert result.stdout == ""
    assert len([line for line in result.stderr.splitlines() if line.startswith("devmod:")]) == 1


def test_quiet_prints_no_summary(project):
    result = devmod("apply", "-q", "--check", str(project))
    assert result.returncode == 1
    assert not SUMMARY.search(result.stderr)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_jobs_give_the_same_result_in_input_order(tmp_path, jobs):
    for index in range(6):
        (tmp_path / f"m{index}.py").write_text(NEEDS_FIX if index % 2 else CLEAN)
    (tmp_path / "m3.py").write_text("import torch\nx = (\n")  # one broken file among them
    result = devmod("apply", "--diff", "-j", jobs, str(tmp_path))
    assert result.returncode == 2
    diffed = re.findall(r"^--- a/.*/(m\d)\.py$", result.stdout, re.M)
    assert diffed == ["m1", "m5"]
    assert f"{tmp_path / 'm3.py'}:" in result.stderr
    counts = summary(result.stderr)
    assert (counts["scanned"], counts["changed"], counts["errors"]) == (6, 2, 1)


def test_bad_jobs_value_is_a_usage_error(tmp_path):
    result = devmod("apply", "-j", "0", str(tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_device_name_names_the_shared_variable(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(NEEDS_FIX)
    result = devmod("apply", "--device-name", "dev", str(path))
    assert result.returncode == 0, result.stderr
    text = path.read_text()
    assert "dev = torch.device(" in text and "Net().to(dev)" in text
    assert "device = torch" not in text


def test_json_format_is_machine_readable(project):
    result = devmod("apply", "--check", "--format", "json", str(project))
    assert result.returncode == 1
    reports = json.loads(result.stdout)
    by_name = {Path(r["path"]).name: r for r in reports}
    assert by_name["train.py"]["changed"] is True
    assert by_name["clean.py"]["changed"] is False
    assert {f["code"] for f in by_name["train.py"]["findings"]} >= {"DM103", "DM102"}


# -- exit 2 and errors -------------------------------------------------------------------------------

def test_a_broken_file_is_named_with_line_and_others_still_processed(project):
    bad = project / "pkg" / "broken.py"
    bad.write_text("import torch\ndef f(:\n    pass\n")
    result = devmod("apply", str(project))
    assert result.returncode == 2
    assert re.search(rf"^{re.escape(str(bad))}:\d+:\d+: error: cannot parse", result.stderr, re.M)
    assert "model = Net().to(device)" in (project / "pkg" / "train.py").read_text()
    assert summary(result.stderr)["errors"] == 1
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["apply", "--bogus", "."], "No such option"),
    (["apply", "does/not/exist.py"], "does not exist"),
    (["apply", "--select", "DM999", "."], "unknown rule code"),
    (["apply", "--ignore", "XYZ", "."], "unknown rule code"),
    (["apply", "--device-name", "not-valid", "."], "identifier"),
    (["apply", "--diff", "--check", "."], "cannot be combined"),
    (["apply"], "give the files"),
    (["apply", "--device-style", "tpu", "."], "tpu"),
    (["nonsense"], "No such command"),
])
def test_user_errors_exit_2_without_traceback(tmp_path, args, message):
    result = devmod(*args, cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_broken_pyproject_is_a_user_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.devmod]\nselect = [\"DM1\"\n")
    (tmp_path / "a.py").write_text(NEEDS_FIX)
    result = devmod("apply", str(tmp_path))
    assert result.returncode == 2 and "pyproject.toml" in result.stderr
    assert "Traceback" not in result.stderr
    assert (tmp_path / "a.py").read_text() == NEEDS_FIX


def test_pyproject_select_is_honoured_and_flags_override(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.devmod]\nselect = ["DM102"]\n')
    path = tmp_path / "a.py"
    path.write_text(NEEDS_FIX)
    devmod("apply", str(tmp_path))
    text = path.read_text()
    assert "device=device" in text and "Net().cuda()" in text  # DM103 not selected
    devmod("apply", "--select", "DM103", str(tmp_path))
    assert "Net().to(device)" in path.read_text()


# -- empty input ---------------------------------------------------------------------------------------

def test_folder_without_python_files_is_not_a_crash(tmp_path):
    (tmp_path / "notes.txt").write_text("import torch\n")
    for flags in ([], ["--check", "-j", "2"]):
        result = devmod("apply", *flags, str(tmp_path))
        assert result.returncode == 0, result.stderr
        assert summary(result.stderr)["scanned"] == 0


def test_cli_runner_matches_subprocess(project):
    """CliRunner (in-process) sees the same contract: streams, codes, summary."""
    result = CliRunner().invoke(main, ["apply", "--check", str(project)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert summary(result.stderr)["changed"] == 1
    result = CliRunner().invoke(main, ["apply", "--diff", str(project)], color=False)
    assert result.exit_code == 0 and "+model = Net().to(device)" in result.stdout
    assert not ANSI.search(result.stdout)


def test_rules_command_lists_and_explains(tmp_path):
    listing = devmod("rules")
    assert listing.returncode == 0 and "DM103" in listing.stdout
    explained = devmod("rules", "DM103")
    assert explained.returncode == 0 and ".cuda()" in explained.stdout
    unknown = devmod("rules", "DM999")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr


# -- libcst's own codemod runner -------------------------------------------------------------------

def _libcst_codemod(target: Path, *extra: str) -> subprocess.CompletedProcess:
    # libcst.tool finds .libcst.codemod.yaml by walking up from the working directory.
    return subprocess.run([sys.executable, "-m", "libcst.tool", "codemod", *extra, "cuda_call.CudaCall",
                           str(target)], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_libcst_tool_runs_a_rule_with_no_format(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(NEEDS_FIX)
    result = _libcst_codemod(path, "--no-format")
    assert result.returncode == 0, result.stderr
    text = path.read_text()
    assert "model = Net().to(device)" in text and "device = torch.device(" in text
    assert 'device="cuda:0"' in text  # only the named rule (plus DM101) ran


def test_libcst_tool_runs_a_rule_as_documented(tmp_path):
    path = tmp_path / "a.py"
    path.write_text(NEEDS_FIX)
    result = _libcst_codemod(path)
    assert result.returncode == 0, result.stderr
    assert "model = Net().to(device)" in path.read_text()
