"""`devmod verify` on projects: `-m package.module`, `--compare` rewriting a whole project in a
temporary copy, child processes, and no `__pycache__` left in the user's tree."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from codemods.verify.command import verify  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]

# A small project: the model (another module) keeps a plain tensor attribute, which stays on the
# CPU when the model moves. devmod must rewrite that module, not only the entry point.
PROJECT = {
    "pyproject.toml": "[project]\nname = 'demo'\nversion = '0'\n",
    "pkg/__init__.py": "",
    "pkg/model.py": "import torch\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.fc = nn.Linear(3, 2)\n        self.scale = torch.ones(2)\n\n"
                    "    def forward(self, x):\n        return self.fc(x) * self.scale\n",
    "pkg/train.py": "import sys\n\nimport torch\n\nfrom pkg.model import Net\n\nmodel = Net().cuda()\n"
                    "x = torch.randn(4, 3).cuda()\nprint(model(x).shape, sys.argv[1:])\n",
    "pkg/__main__.py": "import pkg.train  # noqa: F401\n",
}


def make_project(folder: pathlib.Path) -> dict[str, str]:
    for name, text in PROJECT.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return {name: (folder / name).read_text(encoding="utf-8") for name in PROJECT}


def pycache_in(folder: pathlib.Path) -> list[str]:
    return [str(p) for p in folder.rglob("__pycache__")] + [str(p) for p in folder.rglob("*.pyc")]


def test_m_runs_a_module_like_python_m_and_reports_its_file(tmp_path, monkeypatch):
    make_project(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(verify, ["--simulate", "--json", "-m", "pkg.train", "--", "--epochs", "1"])
    outcome = json.loads(result.stdout)
    assert result.exit_code == 3, result.output
    assert outcome["location"] == os.path.join("pkg", "model.py") + ":12"
    assert outcome["source_line"] == "return self.fc(x) * self.scale" and outcome["rule"] == "DM301"
    assert "pkg" not in sys.modules  # the run's own modules are unloaded again
    assert pycache_in(tmp_path) == []


def test_m_runs_a_packages_main_and_passes_arguments(tmp_path, monkeypatch):
    (tmp_path / "tool").mkdir()
    (tmp_path / "tool" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "tool" / "__main__.py").write_text(
        "import sys\nimport torch\nassert sys.argv[1:] == ['-x', '2'], sys.argv\n"
        "assert sys.argv[0].endswith('__main__.py')\nprint(torch.ones(2, device='cuda').device)\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(verify, ["--simulate", "-m", "tool", "-x", "2"])
    assert result.exit_code == 0, result.output


def test_m_with_an_unknown_module_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(verify, ["--simulate", "-m", "no_such_module_here"])
    assert result.exit_code == 2 and "no module named 'no_such_module_here'" in result.stderr
    assert "Traceback" not in result.output


def test_a_folder_is_not_a_script(tmp_path):
    result = CliRunner().invoke(verify, ["--simulate", str(tmp_path)])
    assert result.exit_code == 2 and "a folder; give its entry point" in result.stderr


def test_compare_rewrites_the_whole_project_in_a_copy(tmp_path):
    before = make_project(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    proc = subprocess.run([sys.executable, "-m", "codemods", "verify", "--simulate", "--compare", "--json",
                           "-m", "pkg.train"], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0, proc.stderr
    assert report["before"]["kind"] == "device-error" and report["after"]["kind"] == "clean"
    assert report["files_changed"] == 2  # the model's module as well as the entry point
    assert {name: (tmp_path / name).read_text(encoding="utf-8") for name in PROJECT} == before
    assert pycache_in(tmp_path) == []


def test_a_script_run_writes_no_bytecode_into_the_users_tree(tmp_path, monkeypatch):
    (tmp_path / "helper.py").write_text("import torch\nX = torch.ones(2)\n", encoding="utf-8")
    script = tmp_path / "main.py"
    script.write_text("import helper\nprint(helper.X.to('cuda').device)\n", encoding="utf-8")
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    result = CliRunner().invoke(verify, ["--simulate", str(script)])
    assert result.exit_code == 0, result.output
    assert pycache_in(tmp_path) == []
    assert sys.dont_write_bytecode is False and "PYTHONDONTWRITEBYTECODE" not in os.environ  # restored


def test_child_processes_of_the_script_write_no_bytecode_either(tmp_path, monkeypatch):
    # A child Python the script starts imports a module of the user's tree: it must not write
    # __pycache__ there either (it inherits PYTHONDONTWRITEBYTECODE, not sys.dont_write_bytecode).
    (tmp_path / "other.py").write_text("VALUE = 3\n", encoding="utf-8")
    script = tmp_path / "main.py"
    script.write_text("import subprocess, sys\nimport torch\n"
                      "subprocess.run([sys.executable, '-c', 'import other'], check=True, cwd=sys.path[0])\n"
                      "print(torch.ones(2).to('cuda').device)\n", encoding="utf-8")
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    result = CliRunner().invoke(verify, ["--simulate", str(script)])
    assert result.exit_code == 0, result.output
    assert pycache_in(tmp_path) == []
