"""Writes that never leave a half-written file where a reader (or git) would find it."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

PARTIAL_SUFFIX = ".partial"


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader sees the old file or the new one, never a part.

    The text goes to a hidden ``.partial`` file beside it, is flushed to disk, and replaces ``path`` in one
    rename. If writing fails the partial file is removed and ``path`` is untouched; if the process is killed
    mid-write, only the hidden partial file is left (``sweep_partials`` removes it later).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=PARTIAL_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def sweep_partials(directory: Path) -> list[Path]:
    """Remove ``.partial`` files a killed writer left behind in ``directory``."""
    removed = []
    for leftover in directory.glob(f".*{PARTIAL_SUFFIX}"):
        with contextlib.suppress(OSError):
            leftover.unlink()
            removed.append(leftover)
    return removed
