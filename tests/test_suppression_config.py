"""Suppression comments and configuration, end to end through the engine and the CLI.

Suppression: ``# devmod: ignore[CODE]``, a bare ``# devmod: ignore``, ``# noqa: CODE``
and ``# devmod: skip-file``. Configuration: ``--select`` / ``--ignore`` (codes and
prefixes), ``[tool.devmod]`` in the nearest pyproject.toml (found by walking up
from the given path), flags over the file, and clear one-line errors (exit 2, no
traceback) for unknown keys, codes and values.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from codemods.cli import main
from codemods.config import Config
from codemods.engine import transform_source
from codemods.rules import all_rules

CUDA_LINE = "x = data.cuda()"
FIXED_LINE = "x = data.to(device)"


def run_engine(code: str, config: Config | None = None):
    return transform_source(textwrap.dedent(code), config=config or Config())


def codes(result) -> set[str]:
    return {f.code for f in result.findings}


# -- suppression comments ----------------------------------------------------------------------------
@pytest.mark.parametrize("comment", [
    "# devmod: ignore[DM103]",
    "# devmod: ignore[DM1]",          # a prefix
    "# devmod: ignore[DM302, DM103]",  # a list
    "# devmod: ignore",               # every code
    "# devmod: ignore[dm103]",        # codes in any case
    "# DEVMOD: IGNORE[DM103]",        # comments in any case
    "# noqa: DM103",
    "# noqa",                         # bare noqa, as ruff and flake8 read it
    "# keep on the GPU  # devmod: ignore[DM103]",
])
def test_line_comment_suppresses_the_fix(comment):
    code = f"import torch\n{CUDA_LINE}  {comment}\n"
    result = run_engine(code)
    assert result.output == code
    assert "DM103" not in codes(result)


@pytest.mark.parametrize("comment", ["# devmod: ignore[DM2]", "# noqa: E501", "# devmod: ignore[DM302]"])
def test_other_codes_do_not_suppress(comment):
    result = run_engine(f"import torch\n{CUDA_LINE}  {comment}\n")
    assert f"{FIXED_LINE}  {comment}\n" in result.output
    assert "DM103" in result.fix_counts


def test_suppression_is_per_line():
    code = f"import torch\n{CUDA_LINE}  # devmod: ignore[DM103]\ny = data.cuda()\n"
    result = run_engine(code)
    assert f"{CUDA_LINE}  # devmod: ignore[DM103]\n" in result.output
    assert "y = data.to(device)\n" in result.output
    assert result.fix_counts["DM103"] == 1


def test_suppression_survives_lines_moving():
    """A fix inserts the device line above, shifting every later line; the comment still counts
    in the passes that follow, also for a report-only finding."""
    code = "import torch\ny = data.cuda()\nz = torch.ones(2).cuda(1)  # devmod: ignore[DM103]\n"
    result = run_engine(code)
    assert "device = torch.device" in result.output
    assert "z = torch.ones(2).cuda(1)  # devmod: ignore[DM103]\n" in result.output
    assert not result.open_findings


# An earlier rule of the same pass (DM304) removes a line above: the rules after it read the
# shorter text, so the comment is looked up, and the findings are placed, in the text each rule read.
LINE_REMOVED_ABOVE = """\
import torch
from torch.autograd import Variable


def evaluate(net):
    x = Variable(torch.rand(2, 3))
    net = net.cuda()  # devmod: ignore[DM103]
    y = torch.rand(2, 3).cuda()
    return net(x), y
"""


def test_suppression_holds_after_a_line_removed_earlier_in_the_pass():
    result = run_engine(LINE_REMOVED_ABOVE)
    assert "    net = net.cuda()  # devmod: ignore[DM103]\n" in result.output
    assert "    y = torch.rand(2, 3).to(device)\n" in result.output
    assert result.fix_counts["DM103"] == 1


def test_fixed_findings_point_at_the_user_line_after_a_line_removed_earlier_in_the_pass():
    code = LINE_REMOVED_ABOVE.replace("  # devmod: ignore[DM103]", "")
    cuda_lines = [f.line for f in run_engine(code).findings if f.code == "DM103"]
    assert sorted(cuda_lines) == [7, 8]  # the lines of the two ``.cuda()`` calls in ``code``


def test_report_only_finding_is_suppressed():
    code = "import torch\ntorch.set_default_tensor_type('torch.cuda.FloatTensor')  # devmod: ignore[DM402]\n"
    assert "DM402" not in codes(run_engine(code))
    assert "DM402" in codes(run_engine(code.replace("  # devmod: ignore[DM402]", "")))


def test_comment_inside_a_string_is_not_a_suppression():
    code = f"import torch\nnote = '# devmod: ignore'\n{CUDA_LINE}\n"
    assert FIXED_LINE in run_engine(code).output


@pytest.mark.parametrize("where", ["top", "bottom"])
def test_skip_file(where):
    marker = "# devmod: skip-file\n"
    body = f"import torch\n{CUDA_LINE}\n"
    code = marker + body if where == "top" else body + marker
    result = run_engine(code)
    assert result.output == code
    assert result.skipped and not result.findings


def test_skip_file_through_the_cli(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(f"# devmod: skip-file\nimport torch\n{CUDA_LINE}\n")
    result = cli(["apply", "--check", str(path)])
    assert result.exit_code == 0, result.output


def test_suppressed_line_passes_check_in_the_cli(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(f"import torch\n{CUDA_LINE}  # noqa: DM103\n")
    assert cli(["apply", "--check", str(path)]).exit_code == 0
    path.write_text(f"import torch\n{CUDA_LINE}\n")
    assert cli(["apply", "--check", str(path)]).exit_code == 1


# -- select / ignore -----------------------------------------------------------------------------------
MIXED = "import torch\nx = data.cuda()\nstate = torch.load('w.pt')\n"  # DM103 and DM302


@pytest.mark.parametrize("config, expected", [
    (Config(), {"DM103", "DM302"}),
    (Config(select=("DM1",)), {"DM103"}),
    (Config(select=("DM103",)), {"DM103"}),
    (Config(select=("DM3",)), {"DM302"}),
    (Config(ignore=("DM103",)), {"DM302"}),
    (Config(ignore=("DM1", "DM3")), set()),
    (Config(select=("DM103",), ignore=("DM1",)), {"DM103"}),  # the more specific prefix wins
    (Config(select=("DM1",), ignore=("DM103",)), set()),
])
def test_select_and_ignore_in_the_engine(config, expected):
    result = run_engine(MIXED, config)
    assert set(result.fix_counts) - {"DM101"} == expected


def test_shared_device_still_runs_under_select():
    """DM101 defines what DM103's fix refers to, even when only DM103 is selected."""
    result = run_engine(MIXED, Config(select=("DM103",)))
    assert "device = torch.device(" in result.output
    assert "torch.load('w.pt')" in result.output


@pytest.mark.parametrize("args, present, absent", [
    (["--select", "DM1"], ["to(device)"], ["map_location"]),
    (["--select", "dm103"], ["to(device)"], ["map_location"]),
    (["--select", "DM103,DM302"], ["to(device)", "map_location"], []),
    (["--select", "DM103", "--select", "DM302"], ["to(device)", "map_location"], []),
    (["--select", "ALL"], ["to(device)", "map_location"], []),
    (["--ignore", "DM103"], ["map_location"], ["to(device)"]),
    (["--ignore", "DM3"], ["to(device)"], ["map_location"]),
    (["--select", "DM1", "--ignore", "DM103"], [], ["to(device)", "map_location"]),
])
def test_select_and_ignore_flags(tmp_path, args, present, absent):
    path = tmp_path / "train.py"
    path.write_text(MIXED)
    result = cli(["apply", "--diff", *args, str(path)])
    assert result.exit_code == 0, result.output
    added = "".join(line for line in result.stdout.splitlines(keepends=True) if line.startswith("+"))
    for text in present:
        assert text in added
    for text in absent:
        assert text not in added


@pytest.mark.parametrize("option", ["--select", "--ignore"])
@pytest.mark.parametrize("value", ["DM999", "XY1", "DM1,nope"])
def test_unknown_code_flag_is_a_usage_error(tmp_path, option, value):
    path = tmp_path / "train.py"
    path.write_text(MIXED)
    result = cli(["apply", "--diff", option, value, str(path)])
    assert result.exit_code == 2
    assert "unknown rule code" in result.output and "Traceback" not in result.output
    assert path.read_text() == MIXED


# -- [tool.devmod] in pyproject.toml --------------------------------------------------------------------
def project(tmp_path: Path, table: str, code: str = MIXED, nested: bool = True) -> Path:
    """A project with pyproject.toml at its root and train.py two folders down."""
    root = tmp_path / "proj"
    folder = root / "src" / "pkg" if nested else root
    folder.mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n\n[tool.devmod]\n" + textwrap.dedent(table))
    path = folder / "train.py"
    path.write_text(code)
    return path


def added_lines(result) -> str:
    return "".join(line for line in result.stdout.splitlines(keepends=True)
                   if line.startswith("+") and not line.startswith("+++"))


def test_pyproject_found_by_walking_up_from_a_file(tmp_path):
    path = project(tmp_path, 'select = ["DM302"]\n')
    result = cli(["apply", "--diff", str(path)])
    assert result.exit_code == 0, result.output
    assert "map_location" in added_lines(result) and ".to(device)" not in added_lines(result)


def test_pyproject_found_by_walking_up_from_a_folder(tmp_path):
    path = project(tmp_path, 'ignore = ["DM302"]\n')
    result = cli(["apply", "--diff", str(path.parent)])
    assert result.exit_code == 0, result.output
    assert ".to(device)" in added_lines(result) and "map_location" not in added_lines(result)


def test_nearest_pyproject_without_a_devmod_table_is_passed_over(tmp_path):
    path = project(tmp_path, 'select = ["DM302"]\n')
    (path.parent / "pyproject.toml").write_text("[project]\nname = 'inner'\n")
    result = cli(["apply", "--diff", str(path)])
    assert ".to(device)" not in added_lines(result) and "map_location" in added_lines(result)


def test_pyproject_exclude(tmp_path):
    path = project(tmp_path, 'exclude = ["legacy_*.py", "*/vendor/*"]\n')
    (path.parent / "legacy_train.py").write_text(MIXED)
    (path.parent / "vendor").mkdir()
    (path.parent / "vendor" / "lib.py").write_text(MIXED)
    result = cli(["apply", str(path.parent.parent.parent)])
    assert result.exit_code == 0, result.output
    assert path.read_text() != MIXED
    assert (path.parent / "legacy_train.py").read_text() == MIXED
    assert (path.parent / "vendor" / "lib.py").read_text() == MIXED


@pytest.mark.parametrize("given", ["root", "dot"])
def test_pyproject_exclude_relative_to_the_project(tmp_path, monkeypatch, given):
    path = project(tmp_path, 'exclude = ["legacy/*"]\n', nested=False)
    (path.parent / "legacy").mkdir()
    (path.parent / "legacy" / "old.py").write_text(MIXED)
    if given == "dot":
        monkeypatch.chdir(path.parent)
    result = cli(["apply", "." if given == "dot" else str(path.parent)])
    assert result.exit_code == 0, result.output
    assert path.read_text() != MIXED
    assert (path.parent / "legacy" / "old.py").read_text() == MIXED


def test_exclude_flag_adds_to_the_file(tmp_path):
    path = project(tmp_path, 'exclude = ["legacy_*.py"]\n')
    (path.parent / "legacy_train.py").write_text(MIXED)
    result = cli(["apply", "--exclude", "train.py", str(path.parent)])
    assert result.exit_code == 0, result.output
    assert path.read_text() == MIXED and (path.parent / "legacy_train.py").read_text() == MIXED


def _unsafe_example() -> tuple[str, str]:
    rule = next(r for r in all_rules() if r.SAFETY == "unsafe")
    example = next(e for e in rule.INVALID if e.expected is not None)
    return example.code, example.expected


def test_pyproject_unsafe_fixes(tmp_path):
    code, expected = _unsafe_example()
    path = project(tmp_path, "unsafe-fixes = true\n", code=code)
    assert cli(["apply", str(path)]).exit_code == 0
    assert path.read_text() == transform_source(code, config=Config(unsafe_fixes=True)).output
    assert path.read_text() != code


def test_unsafe_fixes_off_by_default_and_on_by_flag(tmp_path):
    code, _ = _unsafe_example()
    path = project(tmp_path, 'device-name = "device"\n', code=code)
    result = cli(["apply", str(path)])
    assert "unsafe fix available" in result.output
    assert path.read_text() == transform_source(code, config=Config()).output
    assert cli(["apply", "--unsafe-fixes", str(path)]).exit_code == 0
    assert path.read_text() == transform_source(code, config=Config(unsafe_fixes=True)).output


@pytest.mark.parametrize("style, expected", [
    ("cuda", 'dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'),
    ("cuda-mps", 'dev = torch.device("cuda" if torch.cuda.is_available() else "mps" '
                 'if torch.backends.mps.is_available() else "cpu")\n'),
    ("accelerator", "dev = (torch.accelerator.current_accelerator() if torch.accelerator.is_available() "
                    'else torch.device("cpu"))\n'),
])
def test_pyproject_device_name_and_style(tmp_path, style, expected):
    path = project(tmp_path, f'device-name = "dev"\ndevice-style = "{style}"\n')
    assert cli(["apply", str(path)]).exit_code == 0
    text = path.read_text()
    assert expected in text
    assert "x = data.to(dev)\n" in text


def test_flags_override_the_file(tmp_path):
    path = project(tmp_path, 'select = ["DM302"]\ndevice-name = "dev"\ndevice-style = "accelerator"\n')
    result = cli(["apply", "--select", "DM103", "--device-name", "gpu", "--device-style", "cuda", str(path)])
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert 'gpu = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n' in text
    assert "x = data.to(gpu)\n" in text
    assert "torch.load('w.pt')\n" in text  # DM302 not selected any more


def test_ignore_flag_adds_to_the_file(tmp_path):
    path = project(tmp_path, 'ignore = ["DM302"]\n')
    result = cli(["apply", "--ignore", "DM103", str(path)])
    assert result.exit_code == 0, result.output
    assert path.read_text() == MIXED


@pytest.mark.parametrize("table, message", [
    ('colour = "red"\n', "unknown key(s) in [tool.devmod]: colour"),
    ('select = ["DM999"]\n', "unknown rule code 'DM999'"),
    ('ignore = ["DM1", "bogus"]\n', "unknown rule code 'bogus'"),
    ('select = "DM103"\n', "select must be a list of strings"),
    ('unsafe-fixes = "yes"\n', "unsafe-fixes must be true or false"),
    ('device-name = "my device"\n', "device-name: must be a Python identifier"),
    ('device-style = "tpu"\n', "device-style: must be one of cuda, cuda-mps, accelerator"),
    ("select = [\n", "cannot read"),
])
def test_bad_pyproject_is_a_clear_error(tmp_path, table, message):
    path = project(tmp_path, table)
    result = cli(["apply", "--diff", str(path)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("devmod: error: ") and message in errors[0]
    assert "pyproject.toml" in errors[0]
    assert path.read_text() == MIXED


def test_bad_flag_value_is_a_usage_error(tmp_path):
    path = project(tmp_path, "")
    for args in (["--device-style", "tpu"], ["--device-name", "my device"]):
        result = cli(["apply", "--diff", *args, str(path)])
        assert result.exit_code == 2 and "Traceback" not in result.output


def cli(args: list[str]):
    return CliRunner().invoke(main, [*args[:1], "-j", "1", *args[1:]] if args[0] == "apply" else args)
