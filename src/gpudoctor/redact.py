"""Privacy by construction: strip home paths, user names and host names from text the doctor shares.

Applied to every string that reaches a report, so JSON, Markdown and matrix rows carry none of them.
"""

from __future__ import annotations

import getpass
import os
import re
import socket
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

T = TypeVar("T")


@lru_cache(maxsize=1)
def _private_tokens() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Patterns for this machine's home directory, user name and host name, longest first."""
    rules: list[tuple[re.Pattern[str], str]] = []
    home = os.path.expanduser("~")
    if home and home not in ("/", "~"):
        rules.append((re.compile(re.escape(home.rstrip("/")) + r"(?=/|\b|$)"), "~"))
    # Other users' homes appear in paths too (a venv built by someone else).
    rules.append((re.compile(r"/(?:home|Users)/[^/\s:'\"]+"), "~"))
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = ""
    if len(user) >= 3 and user not in ("root", "runner", "user"):
        rules.append((re.compile(r"\b" + re.escape(user) + r"\b"), "<user>"))
    for host in {socket.gethostname(), socket.getfqdn()}:
        if host and len(host) >= 3 and host not in ("localhost", "localhost.localdomain"):
            rules.append((re.compile(r"\b" + re.escape(host) + r"\b"), "<host>"))
    return tuple(rules)


def redact_text(text: str) -> str:
    """Replace private tokens in ``text``."""
    for pattern, replacement in _private_tokens():
        text = pattern.sub(replacement, text)
    return text


def redact_tree(value: T, redact: Callable[[str], str] = redact_text) -> T:
    """Apply ``redact`` to every string inside nested dicts, lists and tuples."""
    result: Any
    if isinstance(value, str):
        result = redact(value)
    elif isinstance(value, dict):
        result = {redact(k) if isinstance(k, str) else k: redact_tree(v, redact) for k, v in value.items()}
    elif isinstance(value, list):
        result = [redact_tree(v, redact) for v in value]
    elif isinstance(value, tuple):
        result = tuple(redact_tree(v, redact) for v in value)
    else:
        result = value
    return result  # type: ignore[no-any-return]
