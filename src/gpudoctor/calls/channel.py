"""The call checks' side channel and switches: the environment that turns the checks on in a program (the start-up
folder first on PYTHONPATH, the mode, the file), the JSON lines the program appends to that file — each written with
one ``write`` on an O_APPEND descriptor before the call proceeds, a mismatch also fsync'd, so a crash right after
cannot lose it — and the doctor's reading of them into the run's detail."""

from __future__ import annotations

import contextlib
import enum
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpudoctor.errors import GpuDoctorError
from gpudoctor.textfile import read_text

MODE_ENV = "GPUDOCTOR_CALL_CHECKS"  # record (gpudoctor run), warn, raise, off; read by the start-up hook
FILE_ENV = "GPUDOCTOR_CALL_CHECKS_FILE"  # where the events go (gpudoctor run sets it; any mode writes there if set)
HOOK_DIR = Path(__file__).with_name("startup")  # holds the sitecustomize that installs the checks lazily

EVENT_CHECKED = "checked"  # the first call of an op at a line of the program, checked (whatever it found)
EVENT_MISMATCH = "mismatch"  # the first call at a line that does not match the op's declaration
EVENT_UNCHECKED = "unchecked"  # what could not be checked, once each

MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_EACH = 50  # events of a kind kept in a run's detail


class Mode(enum.StrEnum):
    RECORD = "record"  # the side channel only: the program runs as it would
    WARN = "warn"  # and a CallMismatchWarning before the call
    RAISE = "raise"  # and CallMismatch instead of the call
    OFF = "off"

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> Mode:
        try:
            return cls(env.get(MODE_ENV, "").strip().lower() or "off")
        except ValueError:
            return cls.OFF


def environment(base: Mapping[str, str], file: Path, mode: Mode = Mode.RECORD) -> dict[str, str]:
    """What to add to a program's environment ``base`` to check its calls: the start-up folder first on PYTHONPATH
    (before the user's own entries, whose sitecustomize the hook hands over to), the mode and the file."""
    python_path = base.get("PYTHONPATH")
    return {
        "PYTHONPATH": os.pathsep.join(p for p in (str(HOOK_DIR), python_path) if p),
        MODE_ENV: mode.value,
        FILE_ENV: str(file),
    }


class Channel:
    """The file a program appends its events to; opened on first use, never raising into the program."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def write(self, event: dict[str, Any], durable: bool = False) -> None:
        line = (json.dumps(event, default=str) + "\n").encode()
        with contextlib.suppress(OSError):
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            os.write(self._fd, line)
            if durable:
                os.fsync(self._fd)


def new_file(folder: Path) -> Path:
    """An empty file of its own in ``folder`` for one run's events."""
    descriptor, name = tempfile.mkstemp(prefix="call-checks-", suffix=".jsonl", dir=folder)
    os.close(descriptor)
    return Path(name)


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events in the file (none if it is not there); a line cut short by a crash is dropped."""
    try:
        text = read_text(path, MAX_FILE_BYTES)
    except GpuDoctorError:
        return []
    events = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("event") in (EVENT_CHECKED, EVENT_MISMATCH, EVENT_UNCHECKED):
                events.append(event)
    return events


def summary(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A run's detail: the calls checked (op at line), the mismatches (first per line) and what was not checked;
    None when the program made no call of a checked library."""
    if not events:
        return None
    checked = list(dict.fromkeys(f"{e.get('op')} at {e.get('site')}" for e in events if e["event"] == EVENT_CHECKED))
    mismatches: dict[tuple[str, str], dict[str, Any]] = {}
    for event in events:
        if event["event"] == EVENT_MISMATCH and isinstance(event.get("sentence"), str):
            fields = {
                k: event.get(k)
                for k in ("kind", "op", "declared_at", "argument", "declared", "given", "site", "sentence")
            }
            mismatches.setdefault((str(event.get("site")), str(event.get("op"))), fields)
    unchecked = list(dict.fromkeys(str(e.get("what")) for e in events if e["event"] == EVENT_UNCHECKED))
    return {
        "checked": checked[:MAX_EACH],
        "mismatches": list(mismatches.values())[:MAX_EACH],
        "unchecked": unchecked[:MAX_EACH],
    }
