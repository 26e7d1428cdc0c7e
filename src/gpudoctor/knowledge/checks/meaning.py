"""Report predicates that read what a failure of `gpudoctor run` (or a pasted log) means from its evidence, for the
classes beyond an access, a race and an uninitialised read (issue 49): a barrier not every thread reaches, a 32-bit
index that wrapped, memory held by another process, a binary built for another GPU, a result that is right when
launches wait, two streams torch's sanitizer caught, and a Python error in the user's own code. Pure functions of a
Report.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudoctor.instruments.explain import overflow_in_line
from gpudoctor.instruments.triage import OUT_OF_MEMORY, failing_words
from gpudoctor.knowledge.checks.runs import of_kinds, right_when_synchronous, synchronous_rerun
from gpudoctor.knowledge.registry import PredicateEvidence, predicate
from gpudoctor.model import Outcome, ProbeResult, Report
from gpudoctor.protocol import REPRODUCER_RUN_ID, ReproducerDetail


def _class(result: ProbeResult) -> str:
    """The run's class of failure: as recorded by `gpudoctor run`, else read from its text (a pasted log)."""
    recorded = result.details.get(ReproducerDetail.FAILURE_CLASS)
    if isinstance(recorded, str):
        return recorded
    from gpudoctor.instruments.triage import triage

    return triage(result).value


@predicate("reproducer_barrier_located")
def reproducer_barrier_located(report: Report) -> list[PredicateEvidence]:
    """synccheck: a barrier that not every thread of the block reaches (a __syncthreads() under a branch)."""
    return of_kinds(report, frozenset({"sync"}))


@predicate("reproducer_index_overflow_located")
def reproducer_index_overflow_located(report: Report) -> list[PredicateEvidence]:
    """memcheck: an access as far before an allocation of more than 2^31 elements as a wrapped int32 index puts it."""
    found = of_kinds(report, frozenset({"index-overflow"}))
    figures = next((seen for line, _ in found if (seen := overflow_in_line(line)) is not None), None)
    if figures is None:
        return found
    size, distance = figures["element_bytes"], figures["distance_bytes"]
    elements = figures["allocation_bytes"] // size
    index = (1 << 32) - distance // size
    found.append((f"the allocation holds {elements:,} elements of {size} byte{'s' if size > 1 else ''}, more than a "
                  f"signed 32-bit index reaches (2^31 = 2,147,483,648): element {index:,} wraps to "
                  f"{index - (1 << 32):,}, {distance:,} bytes before the allocation — where memcheck saw the access",
                  REPRODUCER_RUN_ID))  # fmt: skip
    return found


@predicate("reproducer_stream_race_located")
def reproducer_stream_race_located(report: Report) -> list[PredicateEvidence]:
    """torch's CUDA stream sanitizer: one tensor touched by two streams with nothing ordering them."""
    return of_kinds(report, frozenset({"stream-race"}))


@predicate("reproducer_right_when_synchronous")
def reproducer_right_when_synchronous(report: Report) -> list[PredicateEvidence]:
    """A failed check of the GPU's results that passes when every launch waits (CUDA_LAUNCH_BLOCKING=1)."""
    result = report.result(REPRODUCER_RUN_ID)
    if result is None or result.outcome is not Outcome.FAIL or _class(result) != "wrong-result":
        return []
    if not right_when_synchronous(result):
        return []
    said = synchronous_rerun(result) or {}
    failed = f"{result.exception_type}: {result.message}" if result.exception_type else result.summary
    return [(f"the command failed ({failed})", REPRODUCER_RUN_ID),
            (f"rerun with every launch synchronous (CUDA_LAUNCH_BLOCKING=1) it exits 0 ({said.get('seconds')} s):"
             f" the kernels give the right result when each waits for the one before", REPRODUCER_RUN_ID)]  # fmt: skip


# --- out of memory: what was asked, what was free, who holds the rest ------------------------------------------------
_SIZE = r"([\d.,]+\s*[KMGTP]?i?B|[\d,]+ bytes)"
_ASKED = re.compile(r"Tried to allocate " + _SIZE + r"|[Oo]ut of memory allocating " + _SIZE)
_CAPACITY = re.compile(r"GPU (\d+) has a total capacity of " + _SIZE + r" of which " + _SIZE + r" is free")
_PROCESS = re.compile(r"Process (\d+) has " + _SIZE + r" memory in use")
_THIS = re.compile(r"this process has " + _SIZE + r" memory in use")
_UNITS = {"B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "PB": 1e15, "KIB": 2**10, "MIB": 2**20,
          "GIB": 2**30, "TIB": 2**40, "PIB": 2**50, "BYTES": 1}  # fmt: skip


def _bytes(text: str) -> float:
    number, _, unit = text.replace(",", "").partition(" ")
    unit = (unit or re.sub(r"[\d.]", "", number) or "B").strip().upper()
    number = re.sub(r"[^\d.]", "", number)
    return float(number or 0) * _UNITS.get(unit, 1)


def _gib(value: float) -> str:
    return f"{value / 2**30:,.2f} GiB"


def _holders(result: ProbeResult, text: str) -> list[dict[str, Any]]:
    """Who held the GPU's memory: NVML's processes watched while it ran (own or another's), else the failure's own
    list (torch names every process on the GPU)."""
    seen = result.details.get(ReproducerDetail.GPU_MEMORY)
    if isinstance(seen, list) and seen:
        return [{"pid": p.get("pid"), "bytes": (p.get("used_memory_mib") or 0) * 2**20,
                 "command": p.get("command"), "own": bool(p.get("own")), "from": "NVML while it ran"}
                for p in seen if isinstance(p, dict)]  # fmt: skip
    return [{"pid": int(m[1]), "bytes": _bytes(m[2]), "command": None, "own": None, "from": "the failure's text"}
            for m in _PROCESS.finditer(text)]  # fmt: skip


def _oom(report: Report) -> tuple[ProbeResult, str, dict[str, Any]] | None:
    result = report.own_result()
    if result is None or not result.outcome.is_problem:
        return None
    text = "\n".join(p for p in (result.message, result.stderr_tail, result.summary) if p)
    if _class(result) != "out-of-memory" and not OUT_OF_MEMORY.search(failing_words(result)):
        return None  # (a run recorded before the class existed is read from its own words)
    asked = _ASKED.search(text)
    capacity = _CAPACITY.search(text)
    this = _THIS.search(text)
    facts: dict[str, Any] = {
        "asked": _bytes(asked[1] or asked[2]) if asked else None,
        "gpu": capacity[1] if capacity else None,
        "total": _bytes(capacity[2]) if capacity else None,
        "free": _bytes(capacity[3]) if capacity else None,
        "this": _bytes(this[1]) if this else None,
        "holders": _holders(result, text),
    }
    return result, text, facts


def _said(facts: dict[str, Any]) -> str:
    parts = []
    if facts["asked"] is not None:
        parts.append(f"asked for {_gib(facts['asked'])}")
    if facts["total"] is not None:
        parts.append(f"GPU {facts['gpu']} holds {_gib(facts['total'])} of which {_gib(facts['free'])} was free")
    if facts["this"] is not None:
        parts.append(f"the failing process itself held {_gib(facts['this'])}")
    return "the allocation " + ", ".join(parts) if parts else "the allocation failed"


def _holder_line(holder: dict[str, Any], whose: str) -> str:
    command = f" (`{holder['command']}`)" if holder.get("command") else ""
    return f"{whose} pid {holder['pid']}{command} held {_gib(holder['bytes'])} ({holder['from']})"


def _failing_pids(result: ProbeResult, facts: dict[str, Any]) -> set[int]:
    """The failing process among NVML's holders: the program's own process holding the least (the one whose
    allocation failed holds what it had before)."""
    own = [h for h in facts["holders"] if h["own"]]
    if not own:
        return set()
    parent = min(own, key=lambda h: (h["bytes"], h["pid"]))
    return {int(parent["pid"])}


def _would_fit(facts: dict[str, Any], held: float) -> bool:
    asked, free = facts["asked"], facts["free"]
    return asked is None or free is None or asked <= free + held


def _held_by(report: Report, whose: str, pick: Callable[[dict[str, Any], set[int]], bool]) -> list[PredicateEvidence]:
    """Out of memory while the holders ``pick`` chooses hold enough that, without them, the allocation would fit (and
    at least a quarter of what was asked): what was asked and free, then each of them, as ``whose``."""
    found = _oom(report)
    if found is None:
        return []
    result, _, facts = found
    failing = _failing_pids(result, facts)
    holders = [h for h in facts["holders"] if h["pid"] not in failing and pick(h, failing)]
    held = sum(h["bytes"] for h in holders)
    if not holders or not _would_fit(facts, held) or (facts["asked"] is not None and held < 0.25 * facts["asked"]):
        return []
    lines: list[PredicateEvidence] = [(_said(facts), result.id)]
    return lines + [(_holder_line(h, whose), result.id) for h in holders[:6]]


@predicate("reproducer_memory_held_by_another_process")
def reproducer_memory_held_by_another_process(report: Report) -> list[PredicateEvidence]:
    """Out of memory while another program (not this one, not its children: NVML watched them while it ran) holds
    enough that without it the allocation would fit."""
    return _held_by(report, "another process:", lambda h, _: h["own"] is False)


@predicate("memory_held_by_a_process_the_text_names")
def memory_held_by_a_process_the_text_names(report: Report) -> list[PredicateEvidence]:
    """Out of memory where only the failure's text names who holds the rest (torch's "Process N has X"; no NVML
    view of the run, as in a pasted log): whether the program started that process is not known."""
    found = _oom(report)
    this = found[2]["this"] if found is not None else None

    def other(holder: dict[str, Any], _: set[int]) -> bool:  # not the failing process itself, by its size
        return holder["own"] is None and not (this is not None and abs(holder["bytes"] - this) < 0.02 * max(this, 1))

    return _held_by(report, "a process other than the failing one:", other)


# What a program printed of the GPU memory in use, line by line, before it ran out: torch's "X already allocated" and
# "allocated: X", CuPy's "(total N bytes)" (what its pool holds), nvidia-smi's "X MiB / Y MiB", a print of
# memory_allocated()/memory_reserved().
_IN_USE = re.compile(
    r"(?:" + _SIZE + r") already allocated|\(total (\d+) bytes\)|(\d+)\s*MiB\s*/\s*\d+\s*MiB"
    r"|(?:memory_allocated|memory_reserved|allocated|reserved|mem(?:ory)?(?: used| in use)?)\W{0,3}[:=]\s*" + _SIZE
)
GROWS_BY = 1.5  # the last reading at least this many times the first
MIN_READINGS = 3


def memory_growth(text: str) -> tuple[float, float, int] | None:
    """The GPU memory in use as the text prints it line by line (the first figure of a line), where it grows over at
    least MIN_READINGS readings: rising or flat at nearly every step, the last GROWS_BY times the first. (first, last,
    readings), else None."""
    readings = []
    for line in text.splitlines():
        if (found := _IN_USE.search(line)) is not None:
            size = next(g for g in found.groups() if g)
            readings.append(_bytes(size) if not size.isdigit() else float(size) * (2**20 if "MiB" in found[0] else 1))
    if len(readings) < MIN_READINGS or readings[0] <= 0:
        return None
    steps = list(itertools.pairwise(readings))
    rising = sum(b >= a * 0.98 for a, b in steps)
    if rising < 0.8 * len(steps) or readings[-1] < GROWS_BY * readings[0]:
        return None
    return readings[0], readings[-1], len(readings)


@predicate("memory_grows_until_out_of_memory")
def memory_grows_until_out_of_memory(report: Report) -> list[PredicateEvidence]:
    """Out of memory after the memory in use grew reading after reading: something kept across iterations (a leak),
    not one allocation too large."""
    found = _oom(report)
    if found is None:
        return []
    result, text, facts = found
    growth = memory_growth(text)
    if growth is None:
        return []
    first, last, count = growth
    return [(f"the memory in use the output prints grew from {_gib(first)} to {_gib(last)} over {count} readings "
             "before the allocation failed", result.id), (_said(facts), result.id)]  # fmt: skip


# A package built for one CUDA major release, as a pip or conda list, a wheel's name or a torch local version names it
_CUDA_MAJOR_PACKAGE = re.compile(
    r"(?<![\w-])(?P<name>(?:nvidia-[a-z-]+-cu|cupy-cuda|jax-cuda|cuda-toolkit-cu)(?P<major>1[0-9])x?(?:-\w+)?)(?![\w-])"
    r"|(?<![\w-])(?P<bindings>cuda-(?:bindings|python))[\s=:]+(?P<bmajor>1[0-9])\.\d"
    r"|\btorch[\s=:]+\d+\.\d+\.\d+\+cu(?P<tmajor>1[0-9])\d\b"
)


@predicate("packages_of_two_cuda_majors_in_text")
def packages_of_two_cuda_majors_in_text(report: Report) -> list[PredicateEvidence]:
    """A failing run's text (a pasted log's pip list, a diagnostic's output) names packages built for two CUDA major
    releases: each loads its own major's libraries, and one that finds the other's fails."""
    result = report.own_result()
    if result is None or not result.outcome.is_problem:
        return []
    text = "\n".join(p for p in (result.stderr_tail, result.message) if p)
    majors: dict[str, list[str]] = {}
    for found in _CUDA_MAJOR_PACKAGE.finditer(text):
        major = found["major"] or found["bmajor"] or found["tmajor"]
        name = found["name"] or found["bindings"] or "torch"
        label = name if found["name"] else f"{name} {major}.x" if found["bindings"] else f"torch +cu{major}x"
        if label not in majors.setdefault(major, []):
            majors[major].append(label)
    if len(majors) < 2:
        return []
    said = "; ".join(f"CUDA {major}: {', '.join(names[:4])}" + (f" and {len(names) - 4} more" if len(names) > 4 else "")
                     for major, names in sorted(majors.items()))  # fmt: skip
    return [(f"the text lists packages built for {len(majors)} CUDA major releases — {said}", result.id)]


@predicate("reproducer_memory_held_by_own_child")
def reproducer_memory_held_by_own_child(report: Report) -> list[PredicateEvidence]:
    """Out of memory while processes the program itself started hold what the allocation needed."""
    if reproducer_memory_held_by_another_process(report):
        return []
    return _held_by(report, "your program's own process", lambda h, _: h["own"] is True)


@predicate("reproducer_allocation_larger_than_gpu")
def reproducer_allocation_larger_than_gpu(report: Report) -> list[PredicateEvidence]:
    """Out of memory for one allocation larger than the whole GPU: no process is in the way."""
    found = _oom(report)
    if found is None:
        return []
    result, _, facts = found
    if facts["asked"] is None or facts["total"] is None or facts["asked"] <= facts["total"]:
        return []
    return [(f"the allocation asked for {_gib(facts['asked'])}; GPU {facts['gpu']} holds {_gib(facts['total'])} in "
             f"all", result.id)]  # fmt: skip


# --- no binary for this GPU -------------------------------------------------------------------------------------------
def _arch_major(arch: str) -> str:
    return re.sub(r"\D", "", arch)[:-1]


@predicate("reproducer_binary_for_another_arch")
def reproducer_binary_for_another_arch(report: Report) -> list[PredicateEvidence]:
    """No kernel image for this GPU, where the program's own source or its own library says which arch it built for
    and none of them runs here (SASS runs on its own major arch; PTX is JIT-compiled for a newer one)."""
    result = report.result(REPRODUCER_RUN_ID)
    seen = result.details.get(ReproducerDetail.BINARIES) if result is not None else None
    if result is None or not isinstance(seen, dict) or not seen.get("gpu_archs"):
        return []
    gpus = [str(a) for a in seen["gpu_archs"]]
    lines: list[PredicateEvidence] = []
    for option in seen.get("sources") or ():
        archs = [str(a) for a in option.get("archs") or ()]
        runs_here = any((a.startswith("compute_") and int(_arch_major(a) or 0) <= int(_arch_major(g) or 0))
                        or _arch_major(a) == _arch_major(g) for a in archs for g in gpus)  # fmt: skip
        if archs and not runs_here:
            lines.append((f"your {option.get('file')}:{option.get('line')} builds its kernel for {', '.join(archs)} "
                          f"(`{option.get('text')}`); this GPU is {', '.join(gpus)}", result.id))  # fmt: skip
    for binary in seen.get("binaries") or ():
        sass, ptx = list(binary.get("sass") or ()), list(binary.get("ptx") or ())
        if not any(_arch_major(a) == _arch_major(g) for a in sass for g in gpus) and not ptx:
            name = Path(str(binary.get("path"))).name
            lines.append((f"cuobjdump: {name} holds machine code (SASS) for {', '.join(sass) or 'no arch'} and no "
                          f"PTX; this GPU is {', '.join(gpus)}", result.id))  # fmt: skip
    return lines


# --- a Python error in the user's own code -----------------------------------------------------------------------
_CHECKS = frozenset({"AssertionError"})
_LIBRARY = re.compile(r"(?:site|dist)-packages|/lib/python\d|^<frozen|^<string>")


@predicate("python_error_in_own_code")
def python_error_in_own_code(report: Report) -> list[PredicateEvidence]:
    """A Python exception whose words say nothing of a GPU, raised in a frame of the user's own files (not a library
    it called): the traceback already says what and where."""
    result = report.own_result()
    if result is None or result.outcome is not Outcome.FAIL or not result.exception_type:
        return []
    if _class(result) != "python-error" or not result.frames or result.exception_type in _CHECKS:
        return []  # a failed check of a result says what is wrong, not that the code that checked it is
    inner = result.frames[0]  # innermost first
    if _LIBRARY.search(inner.file):
        return []
    code = _code_at(result.stderr_tail or "", inner.file, inner.line)
    where = f"{Path(inner.file).name}:{inner.line} in {inner.function}" + (f": `{code}`" if code else "")
    return [(f"{result.exception_type}: {result.message or ''}".rstrip(": "), result.id),
            (f"raised in your own code at {where}", result.id)]  # fmt: skip


def _code_at(stderr: str, file: str, line: int | None) -> str | None:
    lines = stderr.splitlines()
    for n, text in enumerate(lines):
        if f'File "{file}", line {line},' in text and n + 1 < len(lines):
            return lines[n + 1].strip() or None
    return None


@predicate("reproducer_error_read_back")
def reproducer_error_read_back(report: Report) -> list[PredicateEvidence]:
    """The same CUDA error read back at a later call (cudaGetLastError, a synchronisation): an echo."""
    return [(f"{line} — read back after the earlier call failed: its echo, not a second fault", run)
            for line, run in of_kinds(report, frozenset({"sticky"}))]  # fmt: skip
