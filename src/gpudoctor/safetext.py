"""Text from outside gpudoctor (probe output, matrix rows, a user's files) made safe to show: control characters and
escape sequences become visible instead of acting on the terminal. The lowest floor: every renderer uses it."""

from __future__ import annotations

import re

CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 and C1 controls, not \t \n


def safe_text(text: str) -> str:
    """Escape sequences and other control characters become visible (``\\x1b``) instead of acting."""
    return CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
