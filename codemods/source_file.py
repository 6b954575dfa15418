"""Reading and writing Python source files without disturbing their bytes.

devmod must hand back a file exactly as it found it except for the rewritten
expressions: same encoding, same BOM, same line endings, same mode. Writes are
atomic so an interrupted run never leaves a half-written file.
"""

from __future__ import annotations

import io
import os
import tempfile
import tokenize
from dataclasses import dataclass

_BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class SourceText:
    """Decoded text of a file plus what is needed to encode it back identically."""

    text: str
    encoding: str
    bom: bool

    def encode(self, text: str) -> bytes:
        data = text.encode(self.encoding)
        return _BOM + data if self.bom else data


def decode_source(data: bytes) -> SourceText:
    """Decode bytes the way Python does (BOM, then PEP 263 cookie, then UTF-8).

    Raises UnicodeDecodeError / SyntaxError for undecodable input.
    """
    bom = data.startswith(_BOM)
    body = data[len(_BOM):] if bom else data
    # The BOM is part of what detect_encoding judges: a BOM with a latin-1 cookie is refused.
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if bom:
            raise SyntaxError("encoding problem: the file starts with a UTF-8 byte order mark but its "
                              "coding cookie names another encoding") from exc
        raise
    if encoding == "utf-8-sig":
        encoding = "utf-8"
    if "# x\n".encode(encoding, "replace") != b"# x\n":  # utf-16 and friends: CPython cannot read them
        raise SyntaxError(f"encoding problem: {encoding} is not ASCII-compatible, so Python cannot read this file")
    return SourceText(body.decode(encoding), encoding, bom)


def write_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one rename, keeping the file's mode."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=".devmod-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
