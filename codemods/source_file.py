"""Reading and writing Python source files without disturbing their bytes.

devmod must hand back a file exactly as it found it except for the rewritten
expressions: same encoding, same BOM, same line endings, same mode, owner, group,
extended attributes and links. Writes are atomic (a new file renamed over the old
one) so an interrupted run never leaves a half-written file; a file with several
hard links is written in place instead, so every name keeps seeing the same file.
A file that changed on disk since it was read, or whose mode says it is read-only,
is refused rather than overwritten.
"""

from __future__ import annotations

import io
import os
import tempfile
import stat
import tokenize
from dataclasses import dataclass

from .interrupts import writing

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


def wide_encoding_problem(data: bytes) -> str | None:
    """Why a file that mentions torch in UTF-16 or UTF-32 (an editor's "Unicode" setting) cannot be
    processed: CPython cannot read such source, and the fast ``b"torch" in data`` test misses it, so
    without this the file would be skipped as if it did not use torch."""
    if b"t\x00o\x00r\x00c\x00h" in data or b"t\x00\x00\x00o\x00\x00\x00r\x00\x00\x00c" in data:
        return ("cannot decode: the file is UTF-16 or UTF-32 encoded, which Python cannot read as source; "
                "save it as UTF-8")
    return None


def unencodable(exc: UnicodeEncodeError, encoding: str) -> str:
    """Why a rewrite cannot be written in the file's encoding (a ``--device-name`` latin-1 cannot hold)."""
    bad = exc.object[exc.start:exc.end]
    return f"cannot encode the rewrite in the file's encoding {encoding}: {bad!r} ({exc.reason})"


class WriteRefused(OSError):
    """The file is left as it is on disk: read-only, or changed by someone else since it was read."""


def write_atomic(path: str, data: bytes, expected: tuple[bytes, os.stat_result | None] | None = None) -> None:
    """Replace the contents of ``path`` with ``data``, keeping its metadata and links.

    A symlink is written through to its target (the link stays a link). ``expected`` is
    what was read and the stat taken then: if the file no longer matches, nothing is written.
    """
    with writing():  # Ctrl-C and SIGTERM wait for the file to be whole
        _write(os.path.realpath(path), data, expected)


def _write(target: str, data: bytes, expected: tuple[bytes, os.stat_result | None] | None) -> None:
    before = os.stat(target)
    if not _mode_allows_writing(before):
        raise WriteRefused(f"the file is read-only (mode {stat.S_IMODE(before.st_mode):04o}); not rewritten")
    if expected is not None:
        _check_unchanged(target, before, *expected)
    if before.st_nlink > 1:
        _write_in_place(target, data)
        return
    directory = os.path.dirname(target)
    fd, tmp = tempfile.mkstemp(prefix=".devmod-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if not _copy_owner(before, tmp):  # cannot give the new file the old owner: keep the old file
            os.unlink(tmp)
            _write_in_place(target, data)
            return
        os.chmod(tmp, stat.S_IMODE(before.st_mode))  # after chown, which clears setuid bits
        _copy_xattrs(target, tmp)
        if expected is not None:  # the last moment before the rename: an edit since is a conflict
            _check_unchanged(target, os.stat(target), *expected)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _mode_allows_writing(info: os.stat_result) -> bool:
    """The mode bits, not only the permission check: root may write a 0444 file, but must not."""
    if os.geteuid() == 0:
        return bool(info.st_mode & 0o222)
    if info.st_uid == os.geteuid():
        return bool(info.st_mode & stat.S_IWUSR)
    if info.st_gid in (os.getegid(), *os.getgroups()):
        return bool(info.st_mode & stat.S_IWGRP)
    return bool(info.st_mode & stat.S_IWOTH)


def _check_unchanged(target: str, now: os.stat_result, data: bytes, then: os.stat_result | None) -> None:
    same_stat = then is None or (now.st_size, now.st_mtime_ns, now.st_ino) == (then.st_size, then.st_mtime_ns,
                                                                                then.st_ino)
    if same_stat:
        with open(target, "rb") as handle:
            same_stat = handle.read() == data
    if not same_stat:
        raise WriteRefused("conflict: the file changed on disk while devmod was working on it; not overwritten")


def _copy_owner(before: os.stat_result, tmp: str) -> bool:
    """Give ``tmp`` the original owner and group; False when that is not allowed."""
    if (before.st_uid, before.st_gid) == (os.geteuid(), os.getegid()):
        return True
    try:
        os.chown(tmp, before.st_uid, before.st_gid)
    except PermissionError:
        return False
    return True


def _copy_xattrs(source: str, tmp: str) -> None:
    if not hasattr(os, "listxattr"):
        return
    try:
        for name in os.listxattr(source):
            os.setxattr(tmp, name, os.getxattr(source, name))
    except OSError:  # a file system without extended attributes
        pass


def _write_in_place(target: str, data: bytes) -> None:
    """Overwrite the file itself (hard links, foreign owner): one write, then cut the rest off."""
    with open(target, "r+b") as handle:
        handle.write(data)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())
