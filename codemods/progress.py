"""A progress bar for long runs, on a terminal only.

tqdm draws it on stderr, and only once a run has taken more than about a second, so
short runs look as before. Nothing is drawn when stderr is not a terminal (pipes, CI
logs), under ``TERM=dumb`` or ``CI``, or for machine-readable output; the bar is
cleared when the run ends, before the summary.
"""

from __future__ import annotations

import os
import sys
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")
DELAY_S = 1.0


def wanted(enabled: bool = True) -> bool:
    stream = sys.stderr
    return (enabled and stream is not None and stream.isatty() and os.environ.get("TERM") != "dumb"
            and not os.environ.get("CI"))


def progress_bar(items: Iterable[T], total: int, enabled: bool = True) -> Iterator[T]:
    """``items`` as they come, with a bar of ``total`` files when :func:`wanted`."""
    if not wanted(enabled):
        yield from items
        return
    from tqdm import tqdm  # imported only when a bar may be drawn
    # DEVMOD_PROGRESS_DELAY lets tests see the bar without a second of work.
    delay = float(os.environ.get("DEVMOD_PROGRESS_DELAY", DELAY_S))
    with tqdm(items, total=total, file=sys.stderr, delay=delay, unit="file", desc="devmod",
              leave=False, dynamic_ncols=True) as bar:
        yield from bar
