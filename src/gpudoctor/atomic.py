"""Writes that never leave a half-written file where a reader (or git) would find it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

PARTIAL_SUFFIX = ".partial"


def atomic_write(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never a part.

    The text goes to a hidden ``.partial`` file beside it, is flushed to disk, and replaces ``path`` in one
    rename. If writing fails the partial file is removed and ``path`` is untouched; if the process is killed
    mid-write, only the hidden partial file is left, which readers ignore. Only the writer that made a partial
    file ever removes it (another writer could be in the middle of its own). ``mode`` sets the file's
    permissions (the temporary file is private until then).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=PARTIAL_SUFFIX, dir=path.parent)
    except OSError as error:  # name the file the caller meant, not the hidden partial one
        raise OSError(error.errno, error.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
