"""`devmod verify`: the runner API and the click command, on a simulated GPU."""

from __future__ import annotations

import json
import os
import sys

import pytest
from verify_support import BUGGY_LINE, BUGGY_TRAIN, TRAIN, write

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from codemods.verify.command import verify  # noqa: E402
from codemods.verify.runner import RunOutcome, run_script  # noqa: E402

# nn.Linear reaches addmm, whose generated CUDA wrapper words the error this way (as on an H100).
LINEAR_MISMATCH = ("Expected all tensors to be on the same device, but got mat1 is on cpu, different from other "
                   "tensors on cuda:0 (when checking argument in method wrapper_CUDA_addmm)")


def invoke(*args: str):
    return CliRunner().invoke(verify, list(args))


def test_a_correct_training_loop_runs_clean_with_the_model_on_the_gpu(tmp_path):
    script = write(tmp_path, TRAIN)
    outcome = run_script(script, [str(tmp_path / "ckpt.pt")], simulate=True)
    assert outcome.kind == "clean", outcome.traceback
    assert outcome.param_devices == ["cuda:0"] and outcome.exit_code == 0


def test_the_same_loop_without_moving_the_batch_is_a_device_error_at_its_line(tmp_path):
    script = write(tmp_path, BUGGY_TRAIN)
    outcome = run_script(script, [str(tmp_path / "ckpt.pt")], simulate=True)
    assert outcome.kind == "device-error" and outcome.exit_code == 3
    assert outcome.location == (str(script), BUGGY_LINE)
    assert outcome.source_line == "loss = criterion(model(x), y)"
    assert outcome.message == f"RuntimeError: {LINEAR_MISMATCH}"
    assert outcome.devices == ["cuda:0", "cpu"] and (outcome.rule, outcome.rule_name) == ("DM203", "batch-to-device")

    result = invoke("--simulate", str(script), "--", str(tmp_path / "ckpt.pt"))
    assert result.exit_code == 3
    assert f"{script}:{BUGGY_LINE}: device error on simulated cuda:0" in result.stderr
    assert "    loss = criterion(model(x), y)" in result.stderr and LINEAR_MISMATCH in result.stderr
    assert "devices involved: cuda:0 and cpu" in result.stderr
    assert "hint: devmod rule DM203 (batch-to-device) would fix this" in result.stderr
    assert "Traceback" not in result.stderr


def test_clean_run_prints_a_one_line_summary(tmp_path):
    script = write(tmp_path, TRAIN)
    result = invoke(str(script), "--", str(tmp_path / "ckpt.pt"))  # no GPU here: simulated by default
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines()[-1] == (
        f"devmod verify: {script} ran clean on simulated cuda:0 (model parameters on cuda:0)")
    assert "loss" in result.stdout  # the script's own output is untouched


def test_the_script_runs_as_main_with_its_arguments_and_everything_is_restored(tmp_path):
    write(tmp_path, "VALUE = 41\n", name="helper_mod_for_verify.py")
    script = write(tmp_path, """\
        import os, sys
        import helper_mod_for_verify
        assert __name__ == "__main__"
        assert sys.argv[1:] == ["--epochs", "2"], sys.argv
        assert sys.path[0] == os.path.dirname(os.path.abspath(__file__))
        print(helper_mod_for_verify.VALUE + 1)
    """)
    argv, path, cwd = sys.argv[:], sys.path[:], os.getcwd()
    assert run_script(script, ["--epochs", "2"]).kind == "clean"
    assert (sys.argv, sys.path, os.getcwd()) == (argv, path, cwd)
    assert "helper_mod_for_verify" not in sys.modules and not torch.cuda.is_available()
    result = invoke(str(script), "--", "--epochs", "2")
    assert result.exit_code == 0 and result.stdout.strip() == "42"


@pytest.mark.parametrize("body, code", [
    ("raise SystemExit(0)\n", 0),
    ("import sys\nsys.exit()\n", 0),
    ("raise SystemExit(4)\n", 1),
    ("raise ValueError('not a device problem')\n", 1),
    ("import torch\ntorch.ones(2, device='cuda') + torch.ones(2)\n", 3),
])
def test_exit_codes(tmp_path, body, code):
    result = invoke(str(write(tmp_path, body)))
    assert result.exit_code == code, result.output
    if "ValueError" in body:
        assert "Traceback (most recent call last)" in result.stderr
        assert "ValueError: not a device problem" in result.stderr
        assert "runpy" not in result.stderr and "codemods" not in result.stderr  # only the user's frames


def test_bad_command_lines_exit_2_without_a_traceback(tmp_path):
    for args in (["nope.py"], [str(tmp_path)], []):
        result = invoke(*args)
        assert result.exit_code == 2 and "Traceback" not in result.output
    if not torch.cuda.is_available():
        result = invoke("--real", str(write(tmp_path, "print(1)\n")))
        assert result.exit_code == 2 and "--real needs a CUDA GPU" in result.stderr


def test_json_output_is_the_only_thing_on_stdout(tmp_path):
    script = write(tmp_path, "print('hello from the script')\nimport torch\nx = torch.ones(2).numpy()\n"
                             "y = torch.ones(2, device='cuda').numpy()\n")
    result = invoke("--json", str(script))
    assert result.exit_code == 3
    outcome = json.loads(result.stdout)
    assert outcome["kind"] == "device-error" and outcome["location"] == f"{script}:4" and outcome["line"] == 4
    assert outcome["rule"] == "DM303" and outcome["message"].startswith("TypeError: can't convert cuda:0")
    assert outcome["exit_code"] == 3 and "hello from the script" in result.stderr
    assert RunOutcome.from_dict(outcome).location == (str(script), 4)


def test_help_explains_modes_exit_codes_and_compare():
    text = invoke("--help").output
    for needle in ("--real", "--simulate", "--compare", "--json", "simulated cuda:0", "Exit status",
                   "device error", "-- --epochs", "pytest -p codemods.pytest_plugin"):
        assert needle in text


def test_compare_rewrites_a_copy_and_runs_both(tmp_path):
    pytest.importorskip("codemods.engine")
    script = write(tmp_path, """\
        import torch
        import torch.nn as nn
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = nn.Linear(3, 1).to(device)
        batch = torch.randn(4, 3)
        print(model(batch).shape)
    """)
    original = script.read_bytes()
    result = invoke("--simulate", "--compare", "--json", str(script))
    report = json.loads(result.stdout)
    assert report["before"]["kind"] == "device-error" and report["before"]["line"] == 6
    assert report["before"]["rule"] == "DM201"
    assert report["after"]["kind"] == "clean", report["after"]
    assert report["after"]["param_devices"] == ["cuda:0"] and report["changed"] is True
    assert result.exit_code == 0 and script.read_bytes() == original
