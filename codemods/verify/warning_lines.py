"""Warnings raised while the simulation runs point at the line that made the torch call, as
they would without the simulation, not at devmod's own files.

A warning from C++ (``TORCH_WARN``) takes the innermost Python frame as its origin, and a
Python ``warnings.warn(..., stacklevel=2)`` in torch takes its caller; under the simulation
both are a frame of devmod's dispatcher. ``warnings._showwarnmsg`` (which every warning,
shown or recorded by ``catch_warnings``, passes through) is wrapped to move such a warning to
the first frame outside devmod."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from typing import Any, Iterator

import torch

_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_OVERRIDES_FILE = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "overrides.py")


def _caller_outside_devmod() -> tuple[str, int] | None:
    """Where the warning would point without the simulation. The stack reads, innermost first:
    the torch function that warned (run again by devmod), devmod's dispatcher, torch's
    ``handle_torch_function``, the same torch function as first called, then its caller."""
    frame = sys._getframe(2)
    inner: set[Any] = set()
    while frame is not None and not os.path.abspath(frame.f_code.co_filename).startswith(_OWN_DIR):
        inner.add(frame.f_code)
        frame = frame.f_back
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_OWN_DIR):
        frame = frame.f_back
    while frame is not None and (os.path.abspath(frame.f_code.co_filename) == _OVERRIDES_FILE
                                 or frame.f_code in inner):
        frame = frame.f_back
    return (frame.f_code.co_filename, frame.f_lineno) if frame is not None else None


@contextlib.contextmanager
def patched_warnings() -> Iterator[None]:
    real = warnings._showwarnmsg  # type: ignore[attr-defined]

    def showwarnmsg(message: warnings.WarningMessage) -> None:
        filename = message.filename or ""
        if filename.startswith(_OWN_DIR) or os.path.abspath(filename).startswith(_OWN_DIR):
            found = _caller_outside_devmod()
            if found is not None:
                message.filename, message.lineno = found[0], found[1]
                message.line = None  # read again from the new place
        real(message)

    warnings._showwarnmsg = showwarnmsg  # type: ignore[attr-defined]
    try:
        yield
    finally:
        warnings._showwarnmsg = real  # type: ignore[attr-defined]
