"""A question that waits on something outside Python (the driver, a program's answer) asked in a thread beside the
caller's work: a plain thread, since importing concurrent.futures (with logging and queue) costs the inventory-only
run more than the handful of threads it would manage."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Beside(Generic[T]):
    """``function(*args)`` running in a thread of its own from construction; ``result()`` waits for it and returns
    its value or raises what it raised."""

    def __init__(self, function: Callable[..., T], *args: object, name: str) -> None:
        self._function = function
        self._args = args
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._function(*self._args)
        except BaseException as error:  # handed to the caller by result()
            self._error = error

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set by _run whenever no error was
