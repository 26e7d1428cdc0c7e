"""The one exception type for failures a user can act on.

Faces print ``message`` and ``hint`` on one line each and exit with ``exit_code`` (2: bad input or usage).
"""

from __future__ import annotations


class GpuDoctorError(Exception):
    """A failure caused by the user's input or setup, with a hint on what to do."""

    def __init__(self, message: str, hint: str | None = None, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.exit_code = exit_code

    def one_line(self) -> str:
        return f"gpudoctor: error: {self.message}" + (f" (hint: {self.hint})" if self.hint else "")
