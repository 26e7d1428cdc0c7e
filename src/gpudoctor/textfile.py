"""Bounded reads of regular files: every file the doctor reads from a user, a probe or the matrix goes here.

Only regular files are opened (never a FIFO that blocks or a device that never ends), no more than a limit is
read even if the file grows meanwhile, and every failure is one GpuDoctorError (or the subclass the caller names).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpudoctor.errors import GpuDoctorError

KiB = 1024
MiB = 1024 * KiB


def _size(limit_bytes: int) -> str:
    return f"{limit_bytes // MiB} MiB" if limit_bytes >= MiB else f"{limit_bytes // KiB} KiB"


def _read_regular(path: Path, most: int, error: type[GpuDoctorError]) -> bytes:
    """At most ``most`` bytes from the start of the regular file ``path``; ``error`` for anything else.

    O_NONBLOCK makes opening a FIFO return at once (then refused as not a regular file) instead of waiting for
    a writer that may never come; the kind is checked on the open descriptor, so a file swapped in between
    cannot slip through.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except IsADirectoryError:
        raise error(f"{path}: is a folder, not a file") from None
    except OSError as failure:
        raise error(f"{path}: cannot read: {failure.strerror or failure}") from failure
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise error(f"{path}: is a folder, not a file")
        if not stat.S_ISREG(mode):
            raise error(f"{path}: not a regular file (a pipe, socket or device is never read)")
        chunks: list[bytes] = []
        size = 0
        while size < most and (chunk := os.read(fd, most - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as failure:
        raise error(f"{path}: cannot read: {failure.strerror or failure}") from failure
    finally:
        os.close(fd)


def read_bytes(path: Path, limit_bytes: int, error: type[GpuDoctorError] = GpuDoctorError) -> bytes:
    """The content of the regular file ``path`` if it is at most ``limit_bytes`` long; otherwise ``error``
    (no more than the limit is read even if the file grows meanwhile)."""
    data = _read_regular(path, limit_bytes + 1, error)
    if len(data) > limit_bytes:
        raise error(f"{path}: larger than {_size(limit_bytes)}; not read")
    return data


def read_text(path: Path, limit_bytes: int, error: type[GpuDoctorError] = GpuDoctorError) -> str:
    """``read_bytes`` decoded as UTF-8; a file that is not UTF-8 raises ``error``."""
    try:
        return read_bytes(path, limit_bytes, error).decode("utf-8")
    except UnicodeDecodeError as failure:
        raise error(f"{path}: not UTF-8 text (byte {failure.start})") from None


def read_prefix(path: Path, limit_bytes: int) -> bytes | None:
    """At most the first ``limit_bytes`` of a regular file (for scanners that look at the start of big
    files); None for anything that is not a readable regular file."""
    try:
        return _read_regular(path, limit_bytes, GpuDoctorError)
    except GpuDoctorError:
        return None


def read_source(path: Path, limit_bytes: int) -> str | None:
    """A source file's text for scanners (invalid UTF-8 replaced); None when it is not a readable regular file
    or is longer than ``limit_bytes`` (a generated blob is no kernel source to read line by line)."""
    data = read_prefix(path, limit_bytes + 1)
    if data is None or len(data) > limit_bytes:
        return None
    return data.decode("utf-8", errors="replace")
