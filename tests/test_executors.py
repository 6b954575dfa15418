"""The driver on other executors: any concurrent.futures executor, and a real Dask cluster on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from codemods import driver, executors
from codemods.cli import main
from codemods.config import Config

NEEDS_FIX = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"


def _tree(tmp_path, count=6):
    src = tmp_path / "src"
    src.mkdir()
    for index in range(count):
        (src / f"m{index}.py").write_text(NEEDS_FIX if index % 2 else "import torch\nnet = torch.nn.Linear(3, 1)\nprint(net(torch.zeros(3)))\n")
    (src / "broken.py").write_text("import torch\ndef f(:\n")
    return src


def _summary(reports):
    return [(r.path, r.changed, r.diff, r.error, r.findings) for r in reports]


def test_any_concurrent_futures_executor(tmp_path):
    paths = sorted(str(p) for p in _tree(tmp_path).iterdir())
    local = list(driver.process_files(paths, Config(), "diff", jobs=1))
    with ThreadPoolExecutor(2) as pool:
        pooled = list(driver.process_files(paths, Config(), "diff", executor=pool))
    assert _summary(pooled) == _summary(local)
    assert any(r.changed for r in local) and any(r.error for r in local)


def test_a_worker_that_dies_costs_only_its_file(tmp_path, monkeypatch):
    if driver.ProcessPoolExecutor()._mp_context.get_start_method() != "fork":
        pytest.skip("the crash is injected through fork")
    paths = sorted(str(p) for p in _tree(tmp_path, 8).iterdir())
    original = driver.transform_source

    def die_on_m3(source, path, config, **kwargs):
        if path.endswith("m3.py"):
            os._exit(1)  # a hard crash: no exception, the worker process is gone
        return original(source, path, config, **kwargs)
    monkeypatch.setattr(driver, "transform_source", die_on_m3)
    reports = list(driver.process_files(paths, Config(), "check", jobs=2))
    failed = {os.path.basename(r.path): r.error for r in reports if r.error}
    assert set(failed) == {"m3.py", "broken.py"}
    assert "worker process died" in failed["m3.py"]
    assert sum(r.changed for r in reports) == 7  # every other file still rewritten


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_apply_on_a_local_dask_cluster(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEVMOD_CACHE_DIR", str(tmp_path / "cache"))
    args = ["apply", "--diff", "--format", "json", "--no-cache", "src"]
    local = CliRunner().invoke(main, [*args, "-j", "1"])
    port = _free_port()
    # A scheduler and two worker processes on 127.0.0.1, as `dask scheduler` / `dask worker` would run them.
    with distributed.LocalCluster(host="127.0.0.1", scheduler_port=port, n_workers=2, threads_per_worker=1,
                                  processes=True, dashboard_address=None):
        remote = CliRunner().invoke(main, [*args, "--executor", f"dask://127.0.0.1:{port}"])
    assert remote.exit_code == local.exit_code == 2, remote.output  # broken.py: exit 2, the rest still done
    assert json.loads(remote.stdout) == json.loads(local.stdout)


def test_bad_executor_urls_are_user_errors(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text(NEEDS_FIX)
    result = CliRunner().invoke(main, ["apply", "--check", "--executor", "ray://x", str(tmp_path)])
    assert result.exit_code == 2 and "expected dask://HOST:PORT" in result.output
    pytest.importorskip("distributed")
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT_S", 1)
    result = CliRunner().invoke(main, ["apply", "--check", "--executor", f"dask://127.0.0.1:{_free_port()}",
                                       str(tmp_path)])
    assert result.exit_code == 2 and "cannot reach the Dask scheduler" in result.output
    assert "Traceback" not in result.output
