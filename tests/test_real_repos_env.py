"""The trial harness (benchmarks/real_repos.py) runs the devmod it is told to run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_settings_paths_never_replace_the_devmod_under_test(tmp_path):
    # A settings file whose PYTHONPATH named another snapshot's ``codemods`` made ``--devmod-src``
    # a no-op (the eighth run's second pass caught it).
    spec = importlib.util.spec_from_file_location("real_repos", ROOT / "benchmarks" / "real_repos.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["real_repos"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    env = module.base_env(tmp_path / "devmod", [], {"PYTHONPATH": "/stand-ins:/old/devmod"}, tmp_path)
    paths = env["PYTHONPATH"].split(":")
    assert paths[0] == str(tmp_path / "devmod")
    assert paths.index("/stand-ins") < paths.index("/old/devmod")
