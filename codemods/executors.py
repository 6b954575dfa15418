"""Where files are processed: local worker processes (the default), or an existing cluster.

The driver takes any ``concurrent.futures.Executor``; this module turns the command line's
``--executor`` URL into one. ``dask://HOST:PORT`` connects to a running Dask scheduler
(``pip install 'devmod[dask]'``); its workers need devmod installed and must see the files
at the same absolute paths (a shared or identical checkout).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from concurrent.futures import Executor

CONNECT_TIMEOUT_S = 10


class ExecutorError(Exception):
    """The executor URL is wrong or its cluster cannot be reached (a user error, exit 2)."""


@contextlib.contextmanager
def open_executor(url: str | None) -> Iterator[Executor | None]:
    """``None`` (the driver's own process pool) when ``url`` is None, else the cluster's executor."""
    if url is None:
        yield None
        return
    scheme, _, address = url.partition("://")
    if scheme != "dask" or not address:
        raise ExecutorError(f"unknown executor {url!r}; expected dask://HOST:PORT")
    with dask_executor(address) as executor:
        yield executor


@contextlib.contextmanager
def dask_executor(address: str) -> Iterator[Executor]:
    """A ``concurrent.futures`` executor on the Dask scheduler at ``address`` (HOST:PORT)."""
    try:
        from distributed import Client
    except ImportError as exc:
        raise ExecutorError("--executor dask://... needs Dask's distributed scheduler: "
                            "pip install 'devmod[dask]'") from exc
    try:
        client = Client(f"tcp://{address}", timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise ExecutorError(f"cannot reach the Dask scheduler at {address}: {exc}") from exc
    try:
        # pure=False: two chunks with equal arguments are still two tasks (files can change).
        yield client.get_executor(pure=False)
    finally:
        client.close()
