"""The result cache: a warm run answers from it, anything that decides a result invalidates it."""

from __future__ import annotations

import os
import time

import pytest

from codemods import driver
from codemods.cache import Cache, Outcome
from codemods.config import Config

NEEDS_FIX = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"
CLEAN = "import torch\n\nx = 1\n"


def _files(tmp_path, count=5):
    paths = []
    for index in range(count):
        path = tmp_path / f"f{index}.py"
        path.write_text(NEEDS_FIX if index % 2 == 0 else CLEAN)
        old = time.time() - 60  # older than the racy window: the stat index may trust it
        os.utime(path, (old, old))
        paths.append(str(path))
    return paths


def _summary(reports):
    return [(r.path, r.changed, r.diff, r.error, r.skipped, r.findings) for r in reports]


def _run(paths, cache_dir, mode="diff", config=None, **kwargs):
    config = config or Config()
    return list(driver.process_files(paths, config, mode, jobs=1, cache=Cache(config, cache_dir), **kwargs))


def _forbid_engine(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the engine ran although the cache holds the answer")
    monkeypatch.setattr(driver, "transform_source", fail)


def test_warm_run_gives_the_same_reports_without_the_engine(tmp_path, monkeypatch):
    paths = _files(tmp_path)
    cold = _run(paths, tmp_path / "cache")
    assert any(r.changed for r in cold)
    _forbid_engine(monkeypatch)
    assert _summary(_run(paths, tmp_path / "cache")) == _summary(cold)


def test_a_warm_run_does_not_read_unchanged_files(tmp_path, monkeypatch):
    paths = _files(tmp_path)
    _run(paths, tmp_path / "cache", mode="check")
    opened = []
    real_read = driver._read
    monkeypatch.setattr(driver, "_read", lambda path: opened.append(path) or real_read(path))
    _forbid_engine(monkeypatch)
    _run(paths, tmp_path / "cache", mode="check")
    assert opened == []


def test_an_edited_file_is_processed_again(tmp_path):
    paths = _files(tmp_path, 2)
    _run(paths, tmp_path / "cache")
    with open(paths[1], "w") as handle:
        handle.write(NEEDS_FIX)  # same folder, new bytes (and a fresh mtime)
    reports = _run(paths, tmp_path / "cache")
    assert reports[1].changed


def test_an_edit_that_keeps_size_and_mtime_is_still_seen(tmp_path):
    """Size and mtime are trusted only for a file recorded well after its mtime (git's racy check)."""
    path = tmp_path / "a.py"
    path.write_text("import torch\nm = M().cpux()\n")
    _run([str(path)], tmp_path / "cache", mode="check")  # just written: too recent for the stat index
    stat = path.stat()
    path.write_text("import torch\nm = M().cuda()\n")  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _run([str(path)], tmp_path / "cache", mode="check")[0].changed


def test_other_settings_are_other_results(tmp_path):
    paths = _files(tmp_path, 1)
    first = _run(paths, tmp_path / "cache")
    renamed = _run(paths, tmp_path / "cache", config=Config(device_name="dev"))
    assert "dev = torch.device" in renamed[0].diff and renamed[0].diff != first[0].diff


def test_write_mode_from_the_cache_writes_the_rewrite(tmp_path, monkeypatch):
    paths = _files(tmp_path, 1)
    expected = _run(paths, tmp_path / "cache", mode="check")
    assert expected[0].changed
    _forbid_engine(monkeypatch)
    written = _run(paths, tmp_path / "cache", mode="write")
    assert written[0].changed and ".to(device)" in open(paths[0]).read()


def test_a_corrupt_entry_is_a_miss(tmp_path):
    paths = _files(tmp_path, 1)
    cold = _run(paths, tmp_path / "cache")
    for folder, _, names in os.walk(tmp_path / "cache"):
        for name in names:
            with open(os.path.join(folder, name), "wb") as handle:
                handle.write(b"\x80not a pickle")
    assert _summary(_run(paths, tmp_path / "cache")) == _summary(cold)


def test_internal_errors_are_not_cached(tmp_path, monkeypatch):
    paths = _files(tmp_path, 1)

    def crash(*args, **kwargs):
        raise KeyError("a rule bug")
    monkeypatch.setattr(driver, "transform_source", crash)
    assert "internal error" in _run(paths, tmp_path / "cache")[0].error
    monkeypatch.undo()
    assert _run(paths, tmp_path / "cache")[0].error is None


def test_the_cache_is_bounded(tmp_path):
    cache = Cache(Config(), tmp_path / "cache", max_entries=3)
    for index in range(6):
        cache.put(f"f{index}.py", cache.key(f"f{index}.py", b"x"), Outcome())
    cache.close()
    entries = [n for _, _, names in os.walk(tmp_path / "cache" / "entries") for n in names]
    assert len(entries) == 3


def test_no_cache_flag_writes_nothing(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from codemods.cli import main
    paths = _files(tmp_path, 2)
    monkeypatch.setenv("DEVMOD_CACHE_DIR", str(tmp_path / "cache"))
    result = CliRunner().invoke(main, ["apply", "--check", "--no-cache", "-j", "1", *paths])
    assert result.exit_code == 1, result.output
    assert not (tmp_path / "cache").exists()
    CliRunner().invoke(main, ["apply", "--check", "-j", "1", *paths])
    assert (tmp_path / "cache" / "entries").is_dir()


@pytest.mark.parametrize("mode", ["check", "diff"])
def test_cli_warm_output_is_identical(tmp_path, monkeypatch, mode):
    from click.testing import CliRunner

    from codemods.cli import main
    (tmp_path / "src").mkdir()
    _files(tmp_path / "src", 4)
    monkeypatch.setenv("DEVMOD_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    args = ["apply", f"--{mode}", "--format", "json", "-j", "1", "src"]
    cold = CliRunner().invoke(main, args)
    _forbid_engine(monkeypatch)
    warm = CliRunner().invoke(main, args)
    assert (warm.exit_code, warm.output) == (cold.exit_code, cold.output)


def test_rewriting_devmods_code_with_the_same_bytes_keeps_the_cache(tmp_path):
    """A checkout or merge that rewrites devmod's files unchanged (new mtimes) must not invalidate
    every result; a changed byte must. (Keyed by mtimes, a warm benchmark run of diffusers' src/
    recomputed all 1,031 files after a merge touched the tree it measured.)"""
    import shutil

    import codemods
    from codemods.cache import code_fingerprint
    package = tmp_path / "codemods"
    shutil.copytree(os.path.dirname(codemods.__file__), package, ignore=shutil.ignore_patterns("__pycache__"))
    before = code_fingerprint(package)
    later = time.time() + 100
    for path in package.rglob("*.py"):
        path.write_bytes(path.read_bytes())
        os.utime(path, (later, later))
    assert code_fingerprint(package) == before
    engine = package / "engine.py"
    engine.write_text(engine.read_text() + "\n# one more line\n")
    assert code_fingerprint(package) != before


def test_a_warm_run_through_worker_processes_computes_nothing(tmp_path, monkeypatch):
    """The cold run's results come back from pool workers and are stored by the main process;
    the warm run then hands no file to the engine (counted, not timed)."""
    paths = _files(tmp_path, 12)
    config = Config()
    cold = list(driver.process_files(paths, config, "diff", jobs=2, cache=Cache(config, tmp_path / "cache")))
    assert any(r.changed for r in cold) and not any(r.error for r in cold)
    computed = []
    real = driver.transform_bytes
    monkeypatch.setattr(driver, "transform_bytes", lambda *args, **kwargs: computed.append(args[1]) or real(*args, **kwargs))
    cache = Cache(config, tmp_path / "cache")
    warm = list(driver.process_files(paths, config, "diff", jobs=2, cache=cache))
    assert computed == [] and cache.hits == len(paths)
    assert _summary(warm) == _summary(cold)


def test_a_warm_run_opens_an_entry_only_for_a_file_it_rewrites(tmp_path, monkeypatch):
    """An outcome that rewrites nothing is kept in the index: a warm run of an unchanged
    project opens the index, not one entry file per path (counted, not timed)."""
    paths = _files(tmp_path, 6)  # three need a fix, three are clean
    cold = _run(paths, tmp_path / "cache")
    opened = []
    real_load = Cache._load
    monkeypatch.setattr(Cache, "_load", staticmethod(lambda path: opened.append(path) or real_load(path)))
    _forbid_engine(monkeypatch)
    cache = Cache(Config(), tmp_path / "cache")
    warm = list(driver.process_files(paths, Config(), "diff", jobs=1, cache=cache))
    assert _summary(warm) == _summary(cold) and cache.hits == len(paths)
    entries = [p for p in opened if "entries" in p.parts]
    assert len(entries) == sum(r.changed for r in cold) == 3


def test_a_warm_run_does_not_build_the_project_index(tmp_path, monkeypatch):
    """The roles of an unchanged project come from the cache: no summary, no import graph."""
    from codemods.analysis import project
    paths = _files(tmp_path, 4)
    cold = _run(paths, tmp_path / "cache")

    def fail(*args, **kwargs):
        raise AssertionError("the project index was built although nothing changed")
    monkeypatch.setattr(project.ProjectIndex, "__init__", fail)
    _forbid_engine(monkeypatch)
    assert _summary(_run(paths, tmp_path / "cache")) == _summary(cold)


def test_an_edit_elsewhere_in_the_project_changes_the_roles(tmp_path):
    """``train.py`` alone is given; the model class it imports is defined in ``models.py``."""
    (tmp_path / "pyproject.toml").write_text("")
    models, train = tmp_path / "models.py", tmp_path / "train.py"
    models.write_text("import torch\n\nclass Net:\n    pass\n")
    train.write_text("import torch\nfrom models import Net\n\nnet = Net()\n")
    old = time.time() - 60
    for path in (models, train):
        os.utime(path, (old, old))
    before = _run([str(train)], tmp_path / "cache")
    assert not before[0].changed
    models.write_text("import torch\n\nclass Net(torch.nn.Module):\n    pass\n")
    os.utime(models, (old + 1, old + 1))
    after = _run([str(train)], tmp_path / "cache")
    assert after[0].changed and "Net().to(device)" in after[0].diff


def test_the_warm_path_never_imports_libcst():
    # The CLI, the driver and the project index answer a warm run from the cache; importing libcst
    # alone cost more than the rest of that run (it crept in through a shared helper once).
    import subprocess
    import sys

    code = ("import sys, codemods.cli, codemods.driver, codemods.cache, codemods.analysis.project; "
            "sys.exit('libcst' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def _notebook(tmp_path, cells: list[str], name: str = "nb.ipynb") -> str:
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    path = tmp_path / name
    nbformat.write(notebook, str(path))
    old = time.time() - 60
    os.utime(path, (old, old))
    return str(path)


def test_a_warm_run_answers_notebooks_from_the_cache(tmp_path, monkeypatch):
    # A tutorial repository is mostly notebooks: each was transformed again on every run.
    fixed = _notebook(tmp_path, ["import torch", "model = torch.nn.Linear(2, 2).cuda()"])
    broken = _notebook(tmp_path, ["import torch", "x = (1,"], name="broken.ipynb")
    paths = [fixed, broken, *_files(tmp_path, 2)]
    cold = _run(paths, tmp_path / "cache")
    assert "nb.ipynb:cell-2" in cold[0].diff and cold[1].error and cold[1].error_cell == 2
    from codemods import notebooks
    monkeypatch.setattr(notebooks, "transform_notebook", lambda *a, **k: pytest.fail("the notebook ran again"))
    _forbid_engine(monkeypatch)
    warm = _run(paths, tmp_path / "cache")
    assert _summary(warm) == _summary(cold) and warm[1].error_cell == 2
    written = _run(paths, tmp_path / "cache", mode="write")
    assert written[0].changed and ".to(device)" in open(fixed).read()
