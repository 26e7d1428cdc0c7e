"""Where gpudoctor keeps what it reuses between runs, and small answers it remembers there: each under a key that
changes whenever what the answer depends on changes (a file's identity and time, a content hash, gpudoctor's version).

A memo is a cache and nothing more: one that cannot be read or written is simply not used, and an answer is never
taken for another key. Imports nothing heavy: ``suite.bytecode`` reads the folder before the doctor's own imports.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any

from gpudoctor import __version__

CACHE_DIR_ENV = "GPUDOCTOR_CACHE_DIR"
MEMO_FOLDER = "memo"
MEMO_BYTES = 4 * 1024 * 1024  # a memo larger than this is not one gpudoctor wrote: ignored


def cache_dir() -> Path:
    """$GPUDOCTOR_CACHE_DIR, else $XDG_CACHE_HOME/gpudoctor, else ~/.cache/gpudoctor."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpudoctor"


def file_identity(path: str | os.PathLike[str]) -> list[Any] | None:
    """What changes when a file is replaced or rewritten: its resolved path, device, inode, size and modification
    time in nanoseconds (None when it does not exist)."""
    try:
        resolved = os.path.realpath(path)
        found = os.stat(resolved)
    except (OSError, ValueError):
        return None
    return [resolved, found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns]


class Memo:
    """Answers kept in one JSON file of gpudoctor's cache folder (``memo/NAME.json``), at most ``limit`` of them,
    the most recently stored first. Keys are JSON values; they always include gpudoctor's version, so nothing
    outlives an upgrade. Read once per process (on the first lookup); written whole, atomically, on each store."""

    def __init__(self, name: str, limit: int = 64) -> None:
        self.name = name
        self.limit = limit
        self._entries: dict[str, Any] | None = None
        self._lock = threading.Lock()  # the inventory asks its questions from several threads

    def path(self) -> Path:
        return cache_dir() / MEMO_FOLDER / f"{self.name}.json"

    @staticmethod
    def _key(key: Any) -> str:
        import json

        return json.dumps([__version__, key], sort_keys=True, separators=(",", ":"))

    def _load(self) -> dict[str, Any]:
        if self._entries is None:
            self._entries = {}
            import json

            with contextlib.suppress(OSError, ValueError, RecursionError, RuntimeError):
                with open(self.path(), "rb") as handle:
                    text = handle.read(MEMO_BYTES + 1)
                data = json.loads(text) if len(text) <= MEMO_BYTES else None
                if isinstance(data, dict):
                    self._entries = data
        return self._entries

    def forget(self) -> None:
        """Read the file again at the next lookup (what another process stored since, or a new cache folder)."""
        with self._lock:
            self._entries = None

    def get(self, key: Any) -> Any:
        """The answer stored under ``key``, or None."""
        with self._lock:
            return self._load().get(self._key(key))

    def put(self, key: Any, value: Any) -> None:
        """Remember ``value`` (JSON) under ``key``; a cache folder that cannot be written is not an error."""
        import json

        from gpudoctor.atomic import atomic_write

        with self._lock:
            name = self._key(key)
            kept = [(k, v) for k, v in self._load().items() if k != name]
            self._entries = dict([(name, value), *kept][: self.limit])
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                atomic_write(self.path(), json.dumps(self._entries, separators=(",", ":")))
