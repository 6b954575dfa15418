"""The collector's threshold is raised only while a file is rewritten, and put back after."""

from __future__ import annotations

import gc
from concurrent.futures import ThreadPoolExecutor

from codemods import collector
from codemods.engine import transform_source

SOURCE = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"


def test_the_threshold_is_raised_during_a_rewrite_and_restored_after(monkeypatch):
    before = gc.get_threshold()
    seen = []
    real = collector.gc.set_threshold
    monkeypatch.setattr(collector.gc, "set_threshold", lambda *t: seen.append(t) or real(*t))
    transform_source(SOURCE, "m.py")
    assert gc.get_threshold() == before
    assert seen[0][2] == max(before[2], collector.FULL_COLLECTION_EVERY) and seen[-1] == before


def test_concurrent_rewrites_leave_the_threshold_as_it_was():
    before = gc.get_threshold()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: transform_source(SOURCE, f"m{i}.py"), range(8)))
    assert all(r.changed for r in results)
    assert gc.get_threshold() == before
