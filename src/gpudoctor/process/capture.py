"""Bounded capture of a child process's output: drain a pipe to its end, keep only its last bytes.

Used for every child the supervisor runs (probes, users' commands, questions put to another interpreter), so a
chatty or hostile child can neither block on a full pipe nor fill the doctor's memory.
"""

from __future__ import annotations

import collections
import os
import threading
from dataclasses import dataclass
from typing import IO


@dataclass(frozen=True)
class Tail:
    """The last bytes of a stream, and how many it had in all."""

    data: bytes = b""
    total: int = 0

    def text(self) -> str:
        """The tail as text, with a note of how much came before it when some was dropped."""
        # Children may print anything, invalid UTF-8 included; keep it readable rather than fail.
        text = self.data.decode("utf-8", errors="replace")
        if self.total > len(self.data):
            text = f"[... {self.total - len(self.data)} earlier bytes dropped ...]\n" + text
        return text


class TailReader(threading.Thread):
    """Drains a pipe to its end, keeping only the last ``limit`` bytes."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(daemon=True)
        self._stream = stream
        self._limit = limit
        self._chunks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self.total = 0

    def run(self) -> None:
        try:
            while chunk := os.read(self._stream.fileno(), 65536):
                self.total += len(chunk)
                self._chunks.append(chunk)
                self._size += len(chunk)
                while self._size - len(self._chunks[0]) >= self._limit:
                    self._size -= len(self._chunks.popleft())
        except OSError:
            pass  # the pipe went away with its process: what was read is kept
        finally:
            self._stream.close()

    def tail(self) -> Tail:
        return Tail(b"".join(self._chunks)[-self._limit :], self.total)
