"""The engine's fast paths must give exactly what the plain libcst paths give.

- ``fast_visit``: a read-only traversal that builds nothing must call a visitor's callbacks in
  exactly libcst's order (it feeds the metadata every rule reads).
- ``scan``: one walk for all rules over the original tree; the engine without it (one libcst
  traversal per rule) must produce the same output and findings, in the same order.
- the cache's project-index summaries: a warm run parses nothing and sees the same roles.
"""

from __future__ import annotations

import os
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import (ExpressionContextProvider, MetadataWrapper, ParentNodeProvider, PositionProvider,
                             ScopeProvider)

from codemods import engine, fast_visit
from codemods.analysis import project
from codemods.analysis.project import ProjectIndex
from codemods.cache import Cache
from codemods.config import Config
from codemods.rules import all_rules

from test_tree_walk import TRICKY

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


class _Recorder(cst.CSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int, str]] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.events.append(("visit", id(node), type(node).__name__))
        return not isinstance(node, cst.Lambda)  # a pruned subtree must stay pruned

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.events.append(("leave", id(original_node), ""))

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("visit_attr", id(node), attribute))

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        self.events.append(("leave_attr", id(original_node), attribute))


@pytest.mark.parametrize("source", [TRICKY, *(p.read_text() for p in EXAMPLES)])
def test_fast_visit_calls_a_visitor_exactly_as_libcst_does(source):
    module = cst.parse_module(source)
    fast, slow = _Recorder(), _Recorder()
    fast_visit.install()
    assert module.visit(fast) is module
    fast_visit.uninstall()
    try:
        module.visit(slow)
    finally:
        fast_visit.install()
    assert fast.events == slow.events


def _scopes(source: str) -> list[tuple]:
    """Every scope's assignment count and its names' assignments and accesses, by position."""
    wrapper = MetadataWrapper(cst.parse_module(source))
    scopes = set(wrapper.resolve(ScopeProvider).values()) - {None}
    positions = wrapper.resolve(PositionProvider)

    def where(node) -> tuple:
        place = positions.get(node)
        return (place.start.line, place.start.column) if place is not None else (0, 0)
    found = []
    for scope in scopes:
        names = sorted({a.name for a in scope.assignments} | {a.node.value for a in scope.accesses
                                                               if isinstance(a.node, cst.Name)})
        found.append((type(scope).__name__, where(getattr(scope, "node", None)), scope._assignment_count,
                      [(n, sorted(where(a.node) for a in scope.assignments[n] if hasattr(a, "node")),
                        sorted(where(a.node) for a in scope.accesses[n])) for n in names]))
    return sorted(found)


@pytest.mark.parametrize("source", [TRICKY, *(p.read_text() for p in EXAMPLES)])
def test_fast_scope_visit_gives_libcsts_scopes(source):
    # ``install()`` also answers the scope visitor's isinstance test from a per-class cache.
    fast = _scopes(source)
    fast_visit.uninstall()
    try:
        slow = _scopes(source)
    finally:
        fast_visit.install()
    assert fast == slow


CONTEXTS = """\
import a.b as c, d
from e import f as g
x, *y = z[1:2, ::3] = w.v = [q for q in r if q]
del x, w.v, z[0]
t: int = 1
k += 1
(n := 5)
with open(p) as (h, i):
    pass
try:
    pass
except E as err:
    pass
for m, (o, s) in pairs:
    print(m, key=s)
else:
    f(*args, **kw)
global gg
class K(Base, metaclass=M):
    @deco(1)
    def meth(self, a: int = 2, *args, b=lambda y=1: y, **kw) -> "K":
        return a.b[c]
match cmd:
    case Point(x=0, y=yy) | [1, *rest]:
        pass
"""


@pytest.mark.parametrize("source", [TRICKY, CONTEXTS, *(p.read_text() for p in EXAMPLES)])
def test_expression_contexts_are_libcsts(source):
    # The engine gives the scope analysis this mapping instead of libcst's own traversal
    # (benchmarks/README.md: also compared on 4,024 files of the corpora).
    module = cst.parse_module(source)
    expected = dict(MetadataWrapper(module, unsafe_skip_copy=True).resolve(ExpressionContextProvider))
    assert dict(fast_visit.expression_contexts(module)) == expected


@pytest.mark.parametrize("source", [TRICKY, *(p.read_text() for p in EXAMPLES[:6])])
def test_parents_are_libcsts_parents(source):
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ParentNodeProvider)
    assert dict(fast_visit.parents(module)) == dict(expected)


def _rule_sources():
    for rule in all_rules():
        for example in [*rule.VALID, *rule.INVALID]:
            yield pytest.param(example.code, id=f"{rule.CODE}-{len(example.code)}")


def _cases():
    for path in EXAMPLES:
        yield pytest.param(path.read_text(), Config(), id=path.name)
    for source in _rule_sources():  # unsafe fixes on: every rule's fixes are exercised
        yield pytest.param(*source.values, Config(unsafe_fixes=True), id=source.id)


@pytest.mark.parametrize("source, config", list(_cases()))
def test_scan_changes_nothing_the_engine_answers(monkeypatch, source, config):
    fast = engine.transform_source(source, "example.py", config)
    monkeypatch.setattr(engine, "scan", lambda *args: False)  # every pass the old way
    slow = engine.transform_source(source, "example.py", config)
    assert fast.output == slow.output
    assert fast.findings == slow.findings


def test_a_warm_run_reads_the_project_index_from_the_cache(tmp_path, monkeypatch):
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "setup.py").write_text("")
    (folder / "models.py").write_text("import torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n")
    (folder / "train.py").write_text("import torch\nfrom models import Net\n\ndef main():\n    net = Net()\n")
    old = 10**9  # mtimes far in the past: not "racily clean"
    for path in folder.iterdir():
        os.utime(path, ns=(old * 10**9, old * 10**9))
    paths = [str(folder / "train.py")]
    cache = Cache(Config(), root=tmp_path / "cache")
    cold = ProjectIndex.around(paths, summary_of=cache.summary_of)
    cache.close()

    def no_parsing(*args, **kwargs):
        raise AssertionError("a warm run must not summarise a file again")

    monkeypatch.setattr(project, "summarise", no_parsing)
    warm_cache = Cache(Config(), root=tmp_path / "cache")
    warm = ProjectIndex.around(paths, summary_of=warm_cache.summary_of)
    assert warm.role_for(paths[0]) == cold.role_for(paths[0])
    assert warm.role_for(str(folder / "models.py")) == cold.role_for(str(folder / "models.py"))
    assert cold.role_for(str(folder / "models.py")).imported


def _small_project(folder: Path, count: int = 12) -> list[str]:
    (folder / "setup.py").write_text("")
    (folder / "models.py").write_text("import torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n")
    for n in range(count):
        (folder / f"train{n}.py").write_text(
            "import torch\nfrom models import Net\n\nnet = Net().cuda()\nx = torch.zeros(2).cuda()\n")
    return sorted(str(p) for p in folder.glob("*.py"))


def test_the_pool_reads_the_project_for_its_index(tmp_path):
    from concurrent.futures import ProcessPoolExecutor

    from codemods import driver
    files = _small_project(tmp_path)
    with ProcessPoolExecutor(max_workers=2) as pool:
        read, broken = driver._read_in_parallel(pool, files, 2)
    assert not broken
    assert [read(f) for f in files] == [project.read_summary(f) for f in files]


def test_a_worker_lost_while_reading_the_project_costs_nothing(tmp_path, monkeypatch):
    # The pool breaks while it reads the index: this process reads those files itself, and the
    # rewrite runs in a fresh pool, with the same reports as a run in one process.
    from codemods import driver
    files = _small_project(tmp_path)
    alone = [(r.path, r.diff, r.error) for r in driver.process_files(files, Config(), "diff", jobs=1)]
    parent = os.getpid()
    real = driver.read_summary

    def dies_in_a_worker(path: str):
        if os.getpid() != parent:
            os._exit(3)
        return real(path)
    monkeypatch.setattr(driver, "read_summary", dies_in_a_worker)
    seen = []

    def spied(*args):
        read, broken = real_read_in_parallel(*args)
        seen.append(broken)
        return read, broken
    real_read_in_parallel = driver._read_in_parallel
    monkeypatch.setattr(driver, "_read_in_parallel", spied)
    pooled = [(r.path, r.diff, r.error) for r in driver.process_files(files, Config(), "diff", jobs=2)]
    assert seen == [True]  # the pool did break
    assert pooled == alone
    assert sum(1 for _, diff, _ in alone if diff) == 12
