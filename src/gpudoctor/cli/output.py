"""Standard output that fails with one line: a closed pipe, a full disk or a closed descriptor is a usage error
(``gpudoctor: error: cannot write to stdout: ...``, exit 2), never a traceback or a half-shown message."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import TextIO

from gpudoctor.errors import GpuDoctorError


class OutputError(GpuDoctorError):
    """Standard output cannot take the report."""


class _GuardedStdout(io.TextIOBase):
    """Delegates to the real stdout; an OSError on write or flush becomes an OutputError."""

    def __init__(self, inner: TextIO) -> None:
        super().__init__()
        self._inner = inner

    def _failed(self, error: OSError) -> OutputError:
        _discard_stdout(self._inner)
        return OutputError(f"cannot write to stdout: {error.strerror or error}")

    def write(self, text: str) -> int:
        try:
            return self._inner.write(text)
        except OSError as error:
            raise self._failed(error) from None

    def flush(self) -> None:
        try:
            self._inner.flush()
        except OSError as error:
            raise self._failed(error) from None

    def isatty(self) -> bool:
        return self._inner.isatty()

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._inner.encoding

    def writable(self) -> bool:
        return True


def _discard_stdout(inner: TextIO) -> None:
    """Point descriptor 1 at /dev/null, so what is still buffered goes nowhere at exit instead of failing again."""
    with contextlib.suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, inner.fileno())
        os.close(null)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """While the block runs, writes to stdout that fail raise OutputError; on the way out stdout is flushed
    (inside the guard, so a failure at the very end is caught too) and restored."""
    inner = sys.stdout
    if inner is None:  # descriptor 1 was closed before Python started
        raise OutputError("stdout is closed; nothing to print to", hint="run it with stdout open (or > FILE)")
    guard = _GuardedStdout(inner)
    sys.stdout = guard
    try:
        yield
        guard.flush()
    finally:
        sys.stdout = inner
