"""Ctrl-C, SIGTERM and a killed parent: a run stops fast and leaves every file whole.

The main process turns SIGINT and SIGTERM into ``Interrupted``, after stopping the pool
workers itself (waiting for them would let them write files for seconds more); the
command line then exits 130 naming how many files were written. Never 1, which is
``--check``'s answer.

Workers ignore SIGINT (a terminal sends it to the whole process group; the main
process decides), stop on SIGTERM, and stop by themselves when the main process
disappears (kill -9): a thread polls the parent's pid, so no worker goes on writing
files for nobody.

A signal that arrives while a file is being written waits until the write is done
(a few milliseconds): no temporary file stays behind, and the count of written
files, shared with the workers, is exact.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from typing import Any, Iterator

EXIT_INTERRUPTED = 130
PARENT_POLL_S = 0.1
_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_written: Any = None  # multiprocessing.Value shared with the workers, made on first use
_written_here = 0  # used where no shared counter was handed down
_writing = False  # a write is in flight: a signal waits for it
_pending: int | None = None  # the signal that waited


class Interrupted(BaseException):
    """The run was stopped by a signal (BaseException: no ``except Exception`` swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _shared_counter() -> Any:
    global _written
    if _written is None:
        _written = multiprocessing.Value("q", 0)
    return _written


def pool_options() -> dict[str, Any]:
    """Keyword arguments for every ProcessPoolExecutor the driver makes."""
    return {"initializer": worker_init, "initargs": (_shared_counter(), os.getpid())}


def worker_init(counter: Any, parent: int) -> None:
    """Runs first in each pool worker."""
    global _written
    _written = counter
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _leave)
    threading.Thread(target=_watch_parent, args=(parent,), name="devmod-parent-watch", daemon=True).start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:  # re-parented: the main process is gone
        time.sleep(PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)


def _leave(signum: int, frame: object) -> None:
    """A worker told to stop: at once, or right after the write in flight."""
    global _pending
    if _writing:
        _pending = signum
        return
    os._exit(128 + signum)


def files_written() -> int:
    return _written_here + (_written.value if _written is not None else 0)


@contextlib.contextmanager
def writing() -> Iterator[None]:
    """Around one file's write: a signal meanwhile is handled after it, and a success is counted."""
    global _writing, _pending, _written_here
    _writing, _pending = True, None
    try:
        yield
        if _written is not None:
            with _written.get_lock():
                _written.value += 1
        else:
            _written_here += 1
    finally:
        _writing = False
        signum, _pending = _pending, None
        if signum is not None:
            signal.raise_signal(signum)


def stop_workers() -> None:
    """Terminate this process's pool workers now (they clean up their temporary file)."""
    for child in multiprocessing.active_children():
        with contextlib.suppress(OSError):
            child.terminate()
    deadline = time.monotonic() + 0.5
    for child in multiprocessing.active_children():
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGINT/SIGTERM raise Interrupted in the main thread, workers already stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        global _pending
        if _writing:
            _pending = signum
            return
        for sig in _SIGNALS:  # a second Ctrl-C while stopping must not print a traceback
            signal.signal(sig, signal.SIG_IGN)
        stop_workers()
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def interrupted_message(exc: Interrupted, mode: str) -> str:
    done = files_written() if mode == "write" else 0
    return (f"devmod: interrupted by {signal.Signals(exc.signum).name}; {done} file{'s' if done != 1 else ''} "
            "written, every other file left unchanged")
