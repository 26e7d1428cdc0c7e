"""Bounded capture of a child process's output: drain a pipe to its end, keep only its last bytes.

Used for probes and for every question put to another interpreter, so a chatty or hostile child can neither
block on a full pipe nor fill the doctor's memory.
"""

from __future__ import annotations

import collections
import os
import threading
from typing import IO


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

    def data(self) -> bytes:
        return b"".join(self._chunks)[-self._limit :]

    def text(self) -> str:
        data = self.data()
        # Children may print anything, invalid UTF-8 included; keep it readable rather than fail.
        text = data.decode("utf-8", errors="replace")
        if self.total > len(data):
            text = f"[... {self.total - len(data)} earlier bytes dropped ...]\n" + text
        return text
