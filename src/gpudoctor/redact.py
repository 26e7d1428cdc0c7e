"""Privacy by construction: strip home paths, user names and host names from text the doctor shares.

Applied to every string that reaches a report, so JSON, Markdown, JUnit and matrix rows carry none of them,
whatever this machine's names are: every form of the host name (as set, qualified, short, in any case, inside
longer names), the user's names, and the home directory both as $HOME says and as the password database says.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import pwd
import re
import socket
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, TypeVar

T = TypeVar("T")

# Account names shared by every machine of a kind (a container's root, a CI runner): they identify nobody.
GENERIC_USERS = frozenset({"root", "runner", "user", "ubuntu", "admin", "nobody", "jovyan", "vscode"})
# Words the doctor itself writes in every report: a machine named like one would leave the report unreadable
# if redacted, and the name says nothing about who runs it.
VOCABULARY = frozenset(
    {"cpu", "gpu", "cuda", "max", "mojo", "torch", "python", "linux", "nvidia", "pass", "fail", "crash", "skip",
     "test", "host", "localhost", "localhost.localdomain", "none", "true", "false"}
)  # fmt: skip
SUBSTRING_MIN = 6  # names at least this long are found inside longer words too ("xgpu-node07x")


def _host_names() -> set[str]:
    names: set[str] = set()
    for name in (socket.gethostname(), socket.getfqdn(), os.uname().nodename):
        if name:
            names.add(name)
            names.add(name.split(".", 1)[0])  # the short form people and logs use
    return names


def _user_names() -> set[str]:
    names: set[str] = set()
    with contextlib.suppress(KeyError, OSError):
        names.add(getpass.getuser())
    with contextlib.suppress(KeyError):
        names.add(pwd.getpwuid(os.getuid()).pw_name)
    return {n for n in names if n.lower() not in GENERIC_USERS}


def _homes() -> set[str]:
    homes = {os.environ.get("HOME", "")}
    with contextlib.suppress(KeyError):
        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    return {h.rstrip("/") for h in homes if h and h.rstrip("/") not in ("", "/")}


def _name_pattern(name: str) -> re.Pattern[str]:
    if len(name) >= SUBSTRING_MIN:
        return re.compile(re.escape(name), re.IGNORECASE)
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(name) + r"(?![A-Za-z0-9])", re.IGNORECASE)


Rules = tuple[tuple[re.Pattern[str], str], ...]


def private_rules(homes: Iterable[str], users: Iterable[str], hosts: Iterable[str]) -> Rules:
    """Patterns for the given home folders, user names and host names: paths first, then names longest first
    (so a host name that contains the user name goes as a whole)."""
    rules: list[tuple[re.Pattern[str], str]] = []
    for home in sorted(set(homes), key=len, reverse=True):
        rules.append((re.compile(re.escape(home) + r"(?=/|\b|$)"), "~"))
    # Other users' homes appear in paths too (a venv built by someone else).
    rules.append((re.compile(r"/(?:home|Users)/[^/\s:'\"]+"), "~"))
    names = [(n, "<host>") for n in set(hosts)] + [(n, "<user>") for n in set(users)]
    for name, replacement in sorted(names, key=lambda pair: len(pair[0]), reverse=True):
        if len(name) >= 2 and name.lower() not in VOCABULARY:
            rules.append((_name_pattern(name), replacement))
    return tuple(rules)


@lru_cache(maxsize=1)
def _private_tokens() -> Rules:
    """This machine's rules (read once: names do not change during a run)."""
    return private_rules(_homes(), _user_names(), _host_names())


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
