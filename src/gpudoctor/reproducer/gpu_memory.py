"""Who holds the GPU's memory while the user's command runs: NVML's compute processes, read every second (a
failure's text says how much was asked and free, not who holds the rest; after the command ends its own processes
are gone from NVML's list). Kept for a run that failed out of memory, each process marked as the command's own (its
process group) or another's; command lines are redacted."""

from __future__ import annotations

import threading
from typing import Any

from gpudoctor.facts.nvml import gpu_processes
from gpudoctor.redact import redact_text

EVERY_S = 1.0
MAX_PROCESSES = 64


def _group(pgid: int) -> set[int]:
    """The command's own processes: its descendants and its process group (reproducer.processes.family)."""
    from gpudoctor.reproducer.processes import family

    return set(family(pgid))


class GpuMemoryWatcher:
    """The last view of NVML's compute processes seen while the command ran (the fullest one: a process that
    exits just before the end takes its memory with it)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] | None = None
        self._held_mib = -1

    def watch(self, pid: int, stop: threading.Event) -> None:
        while not stop.is_set():
            processes = gpu_processes()
            if processes is None:
                return  # no driver: nothing to watch
            own = _group(pid)
            held = sum(p.get("used_memory_mib") or 0 for p in processes)
            if held >= self._held_mib:
                self._held_mib = held
                self.seen = [{**p, "command": redact_text(p["command"]) if p.get("command") else None,
                              "own": int(p["pid"]) in own} for p in processes[:MAX_PROCESSES]]  # fmt: skip
            stop.wait(EVERY_S)
