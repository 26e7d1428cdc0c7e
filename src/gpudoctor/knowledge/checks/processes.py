"""Report predicates over every process of a user's command (`gpudoctor run`, issue 49): at a hang's deadline, the
process that waits and what for, and the one it waits for (a rank in its own code, ranks in different collectives, a
pool's busy worker); after a run whose worker died, that worker by its index, pid, signal or exception and frames.
Pure functions of a Report.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from gpudoctor.knowledge.registry import PredicateEvidence, predicate
from gpudoctor.model import Frame, Outcome, ProbeResult, Report
from gpudoctor.process.endings import faulthandler_frames
from gpudoctor.protocol import REPRODUCER_RUN_ID as RUN_ID
from gpudoctor.protocol import ReproducerDetail

_C10D = "torch/distributed/distributed_c10d.py"
_LIBRARY_PARTS = ("/site-packages/", "/dist-packages/", "/lib/python3", "/lib64/python3")
# processes the Python runtime starts for itself: never the one a program waits for
_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver", "multiprocessing.semaphore_tracker")
_EXITED = re.compile(r"process (?P<index>\d+) terminated with (?P<how>signal (?P<signal>SIG[A-Z0-9]+)|exit code "
                     r"(?P<code>-?\d+))")  # fmt: skip
_RAISED = re.compile(r"-- Process (?P<index>\d+) terminated with the following error:")
SHOWN = 4  # processes of one kind named in a finding; the rest are counted
_WORKER_DEATHS = ("ProcessExitedException", "ProcessRaisedException", "BrokenProcessPool")


def is_library(path: str) -> bool:
    """Whether a frame's file is a library's or the interpreter's (site-packages, the standard library, a string
    given to -c, a frozen module) rather than the user's own code."""
    return path.startswith("<") or any(part in path for part in _LIBRARY_PARTS)


def _library_path(path: str) -> str:
    """A library file by its place in its package (torch/multiprocessing/spawn.py, multiprocessing/pool.py)."""
    for mark in ("/site-packages/", "/dist-packages/"):
        if mark in path:
            return path.split(mark, 1)[1]
    found = re.search(r"/lib(?:64)?/python3[.\d]*/(.+)$", path)
    return found[1] if found else Path(path).name


def _read(result: ProbeResult) -> dict[str, Any]:
    seen = result.details.get(ReproducerDetail.PROCESSES)
    return seen if isinstance(seen, dict) else {}


def _where(frame: dict[str, Any]) -> str:
    return f"{Path(str(frame.get('file'))).name}:{frame.get('line')}"


class Seen:
    """One process as read at the deadline: its label, where its main thread is, and what it waits in."""

    def __init__(self, entry: dict[str, Any], root: int | None) -> None:
        self.pid = entry.get("pid")
        self.rank = entry.get("rank") if isinstance(entry.get("rank"), int) else None
        self.command = str(entry.get("command") or "")
        self.is_root = self.pid == root
        threads = [t for t in entry.get("threads") or () if isinstance(t, dict)]
        main = next((t for t in threads if t.get("os_thread_id") == self.pid), threads[0] if threads else {})
        self.frames: list[dict[str, Any]] = [f for f in main.get("frames") or () if isinstance(f, dict)]
        self.native = main.get("native")
        self.read = bool(self.frames)
        self.not_read = entry.get("not_read")
        self.helper = any(h in self.command for h in _HELPERS)
        in_c10d = [f for f in self.frames if str(f.get("file", "")).endswith(_C10D)]
        self.collective: str | None = str(in_c10d[-1].get("function")) if in_c10d else None  # the API called
        self.own = next((f for f in self.frames if not is_library(str(f.get("file", "")))), None)
        self.inner = self.frames[0] if self.frames else None

    @property
    def label(self) -> str:
        if self.rank is not None:
            return f"rank {self.rank} (pid {self.pid})"
        return f"the command (pid {self.pid})" if self.is_root else f"pid {self.pid}"

    @property
    def runs_own_code(self) -> bool:
        return self.inner is not None and self.inner is self.own

    def doing(self) -> str:
        """What its main thread does: its own code at a line, a collective at the user's line, or a library's wait."""
        if self.inner is None:
            return f"could not be read ({self.not_read})" if self.not_read else "was not read"
        own = f"{_where(self.own)} ({self.own.get('function')})" if self.own is not None else None
        if self.collective is not None:
            return f"waits in {self.collective}" + (f" at {own}" if own else "")
        if self.runs_own_code:
            return f"runs its own code at {own}"
        inner = f"{self.inner.get('function')} ({_where(self.inner)})"
        called = self.frames.index(self.own) - 1 if self.own is not None else -1
        if called <= 0:  # no own frame, or the library frame the user's code called is the innermost itself
            native = f" [native: {self.native}]" if self.native and self.own is None else ""
            return f"waits in {inner}{native}" + (f", called from your {own}" if own else "")
        api = self.frames[called]
        return f"waits in {api.get('function')} ({_library_path(str(api.get('file')))}:{api.get('line')}), called " \
               f"from your {own}; innermost {inner}"  # fmt: skip


def _seen(result: ProbeResult) -> list[Seen]:
    entries = [e for e in _read(result).get("processes") or () if isinstance(e, dict)]
    root = entries[0].get("pid") if entries else None
    return [Seen(e, root) for e in entries]


def _hang(report: Report) -> tuple[ProbeResult, list[Seen]] | None:
    result = report.result(RUN_ID)
    if result is None or result.outcome is not Outcome.TIMEOUT:
        return None
    return result, _seen(result)


def _counted(result: ProbeResult) -> list[str]:
    seen = _read(result)
    lines = []
    if seen.get("not_read"):
        lines.append(f"{seen.get('not_read')} more of its {seen.get('total')} processes were not read (at most "
                     f"{len(seen.get('processes') or ())} are)")  # fmt: skip
    if seen.get("note"):
        lines.append(str(seen["note"]))
    return lines


def _ranks(seen: list[Seen]) -> list[Seen]:
    ranks = sorted((s for s in seen if s.rank is not None and s.read), key=lambda s: s.rank or 0)
    return ranks if len(ranks) >= 1 else []


def _missing_ranks(seen: list[Seen], result: ProbeResult) -> list[int]:
    """Ranks the launcher started that no longer run: mp.spawn's nprocs (or WORLD_SIZE) minus the ranks read."""
    sizes = [e.get("spawn_processes") or e.get("world_size") for e in _read(result).get("processes") or ()
             if isinstance(e, dict)]  # fmt: skip
    size = next((s for s in sizes if isinstance(s, int)), None)
    present = {s.rank for s in seen if s.rank is not None}
    return [] if size is None or not present else [r for r in range(size) if r not in present]


@predicate("reproducer_rank_never_reached_collective")
def reproducer_rank_never_reached_collective(report: Report) -> list[PredicateEvidence]:
    """A hang where some ranks wait in a collective and another rank is elsewhere (its own code, another wait) or no
    longer runs: that rank first, then the ranks that wait for it."""
    hang = _hang(report)
    if hang is None:
        return []
    result, seen = hang
    ranks = _ranks(seen)
    waiting = [s for s in ranks if s.collective is not None]
    elsewhere = [s for s in ranks if s.collective is None]
    missing = _missing_ranks(seen, result)
    if not waiting or not (elsewhere or missing):
        return []
    names = sorted({s.collective for s in waiting if s.collective})
    lines = [f"{s.label} never reached the collective: it {s.doing()}" for s in elsewhere]
    lines += [f"rank {r} is no longer running: it ended before the collective the others wait in" for r in missing]
    them = "them" if len(elsewhere) + len(missing) > 1 else "it"
    lines += [f"{s.label} {s.doing()}, for {them}" for s in waiting]
    if len(names) > 1:
        lines.append(f"the waiting ranks are in different collectives too: {', '.join(names)}")
    lines += _parent_lines(seen) + _counted(result)
    return [(line, RUN_ID) for line in lines]


@predicate("reproducer_ranks_in_different_collectives")
def reproducer_ranks_in_different_collectives(report: Report) -> list[PredicateEvidence]:
    """A hang where every rank read waits in a collective, but not the same one at the same line: they issued
    different sequences of collectives."""
    hang = _hang(report)
    if hang is None:
        return []
    result, seen = hang
    ranks = _ranks(seen)
    if len(ranks) < 2 or any(s.collective is None for s in ranks) or _missing_ranks(seen, result):
        return []
    calls = {(s.collective, _where(s.own) if s.own else None) for s in ranks}
    if len(calls) < 2:
        return []
    lines = [f"{s.label} {s.doing()}" for s in ranks]
    names = sorted({s.collective for s in ranks if s.collective})
    if len(names) > 1:
        lines.append(f"the ranks wait in different collectives ({', '.join(names)}): they issued different "
                     "sequences of collectives, and each waits for a partner call that never comes")  # fmt: skip
    else:
        lines.append(f"the ranks wait in {names[0]} called from different lines: the calls do not pair up")
    lines += _parent_lines(seen) + _counted(result)
    return [(line, RUN_ID) for line in lines]


def _parent_lines(seen: list[Seen]) -> list[str]:
    root = next((s for s in seen if s.is_root and s.rank is None), None)
    return [f"{root.label} only waits for its processes: it {root.doing()}"] if root is not None and root.read else []


@predicate("reproducer_worker_process_hangs")
def reproducer_worker_process_hangs(report: Report) -> list[PredicateEvidence]:
    """A hang of a command with worker processes and no ranks (a multiprocessing pool, DataLoader workers, a
    subprocess): the workers busy in their own code or waiting elsewhere, then what the command waits in."""
    hang = _hang(report)
    if hang is None:
        return []
    result, seen = hang
    workers = [s for s in seen if not s.is_root and not s.helper]
    if not workers or any(s.rank is not None for s in seen):
        return []
    idle = [s for s in workers if s.read and _idle(s)]
    busy = [s for s in workers if s.read and s not in idle]
    unread = [s for s in workers if not s.read]
    lines = [f"{s.label}, a worker, {s.doing()}" for s in busy[:SHOWN]]
    if len(busy) > SHOWN:
        lines.append(f"and {len(busy) - SHOWN} more workers read")
    lines += [f"{s.label} could not be read: {s.not_read}" for s in unread[:SHOWN] if s.not_read]
    root = next((s for s in seen if s.is_root), None)
    if root is not None and root.read:
        lines.append(f"{root.label} waits for {'it' if len(busy) == 1 else 'them'}: it {root.doing()}")
    if idle:
        pids = ", ".join(str(s.pid) for s in idle[:SHOWN]) + (", ..." if len(idle) > SHOWN else "")
        lines.append(f"{len(idle)} other worker{'s' if len(idle) > 1 else ''} wait{'' if len(idle) > 1 else 's'} for "
                     f"work (pid {pids})")  # fmt: skip
    if not busy and not unread:
        return []
    return [(line, RUN_ID) for line in lines + _counted(result)]


def _idle(seen: Seen) -> bool:
    """A pool's worker between tasks: it waits for the next task in the pool's own code (pool.py, process.py)."""
    in_pool = any(Path(str(f.get("file"))).name in ("pool.py", "queues.py") for f in seen.frames)
    return in_pool and (seen.own is None or seen.own is seen.frames[-1])


def _spawned(result: ProbeResult) -> list[dict[str, Any]]:
    """The processes mp.spawn started, as seen while the command ran, in the order they started."""
    seen = [p for p in _read(result).get("seen") or () if isinstance(p, dict)]
    return [p for p in seen if "spawn_main" in str(p.get("command"))]


def _died_at(result: ProbeResult) -> Frame | None:
    """The innermost frame of the user's own code in the last faulthandler dump on stderr (the worker's)."""
    frames = [f for f in faulthandler_frames(result.stderr_tail or "") if f.thread == "current"]
    return next((f for f in frames if not is_library(f.file)), frames[0] if frames else None)


@predicate("reproducer_worker_process_died")
def reproducer_worker_process_died(report: Report) -> list[PredicateEvidence]:
    """A command whose worker died (mp.spawn's ProcessExitedException or ProcessRaisedException, a pool's
    BrokenProcessPool): that worker, its signal or exception and where it was, not the parent's join."""
    result = report.result(RUN_ID)
    if result is None or not result.outcome.is_problem or result.outcome is Outcome.TIMEOUT:
        return []
    kind = next((k for k in _WORKER_DEATHS if k in (result.exception_type or "")), None)
    if kind is None:
        return []
    words = f"{result.message or ''}\n{result.stderr_tail or ''}"
    lines: list[str] = []
    exited, raised = _EXITED.search(words), _RAISED.search(words)
    found = exited or raised
    index = int(found["index"]) if found else None
    spawned = _spawned(result)
    pid = spawned[index].get("pid") if index is not None and index < len(spawned) else None
    who = f"mp.spawn's process {index}" if index is not None else "a worker of the pool"
    who += f" (pid {pid}, as seen while it ran)" if pid is not None else ""
    if exited and exited["signal"]:
        lines.append(f"{who} died of {exited['signal']}")
    elif exited:
        lines.append(f"{who} exited with status {exited['code']}")
    elif raised:
        lines.append(f"{who} raised {_child_exception(result.stderr_tail or '')}")
    else:
        lines.append(f"{who} ended abruptly: {result.message or kind}")
    died = _died_at(result)
    if died is not None and not raised:
        lines.append(f"where it died (its faulthandler dump): {Path(died.file).name}:{died.line} ({died.function})")
    elif raised:
        own = next((f for f in result.frames if not is_library(f.file)), None)
        lines += [f"where it raised: {Path(f.file).name}:{f.line} ({f.function})" for f in (own,) if f is not None]
    parent = next((f for f in result.frames if not is_library(f.file)), None)
    join = f" at {Path(parent.file).name}:{parent.line}" if parent is not None and not raised else ""
    lines.append(f"the parent only reported it: {kind} from its join{join}")
    return [(line, RUN_ID) for line in lines]


def _child_exception(stderr: str) -> str:
    """The exception line of the worker's traceback that ProcessRaisedException carries (the last one on stderr)."""
    block = stderr[stderr.rfind("terminated with the following error:") :]
    said = [line.strip() for line in block.splitlines() if re.match(r"^[A-Za-z_][\w.]*(Error|Exception)\b", line)]
    return said[-1][:300] if said else "an exception"
