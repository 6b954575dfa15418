"""Fewer full garbage collections while a file is rewritten.

A rewrite builds a large tree and its metadata, and again after each fix. CPython's collector
runs a full collection every ten collections of the middle generation, each scanning every
object alive, so on a large module the collector's work grew faster than the module: one
module repeated 8 times made the collector scan 12.3 times the objects of one copy (counted with
``gc.callbacks``), and the whole rewrite cost 8.6 times one copy. With a full collection at most
every 100 middle-generation collections (young ones unchanged, and CPython still skips a full
collection until a quarter of the old objects are new), 8 copies scan 8.2 times the objects and
cost 7.7 times one copy, for a few MiB more at the peak (benchmarks/README.md, thirteenth round).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

FULL_COLLECTION_EVERY = 100  # middle-generation collections per full one (CPython's default: 10)

_lock = threading.Lock()
_depth = 0
_saved: tuple[int, int, int] | None = None


@contextlib.contextmanager
def rarer_full_collections() -> Iterator[None]:
    """Raise the oldest generation's threshold for the duration; nested and concurrent uses (a
    thread pool of rewrites) share one change, undone when the last one leaves."""
    global _depth, _saved
    with _lock:
        if _depth == 0:
            _saved = gc.get_threshold()
            young, middle, old = _saved
            gc.set_threshold(young, middle, max(old, FULL_COLLECTION_EVERY))
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _saved is not None:
                gc.set_threshold(*_saved)
