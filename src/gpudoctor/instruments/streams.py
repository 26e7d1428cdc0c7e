"""torch's CUDA stream sanitizer (CSAN, `TORCH_CUDA_SANITIZER=1`) read in the words of the user's code: which tensor
(where it was allocated), which two streams touched it, in which ops, at which lines of the user's files, with no
synchronisation between them. Its report is torch's UnsynchronizedAccessError text (torch/cuda/_sanitizer.py); pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.process.endings import TRACEBACK_FRAME

RACE_HEADER = re.compile(r"CSAN detected a possible data race on tensor with data pointer (?P<pointer>\d+)")
_ACCESS = re.compile(r"^(?P<which>Access|Previous access) by stream (?P<stream>\d+) during kernel:\s*$")
_KIND = re.compile(
    r"^(?P<kind>reading from|writing to)(?: argument\(s\) (?P<args>.*?))?(?:,? and to)?(?: the output)?\s*$"
)
MAX_RACES = 8


@dataclass(frozen=True)
class StreamAccess:
    stream: int
    operator: str  # the op's schema, as torch prints it ("aten::mul.out(Tensor self, ...) -> Tensor(a!)")
    writes: bool
    arguments: str | None
    site: str | None  # the innermost line of the user's own files in its stack: "prog.py:14: `torch.mul(a, 5, out=a)`"


@dataclass(frozen=True)
class StreamRace:
    pointer: int
    access: StreamAccess
    previous: StreamAccess
    allocated_at: str | None


def _site(lines: list[str], own: frozenset[str]) -> str | None:
    """The last frame in one of ``own`` (base names; any file outside site-packages when empty) with its code."""
    found = None
    for n, line in enumerate(lines):
        match = TRACEBACK_FRAME.match(line)
        if match is None:
            continue
        name = Path(match["file"]).name
        mine = name in own if own else not re.search(r"(?:site|dist)-packages|/lib/python3", match["file"])
        if mine:
            code = lines[n + 1].strip() if n + 1 < len(lines) and not TRACEBACK_FRAME.match(lines[n + 1]) else ""
            found = f"{name}:{match['line']}" + (f": `{code}`" if code else "")
    return found


def _access(lines: list[str], stream: int, own: frozenset[str]) -> StreamAccess:
    operator = lines[0].strip() if lines else "?"
    kind = _KIND.match(lines[1].strip()) if len(lines) > 1 else None
    return StreamAccess(
        stream=stream, operator=operator, writes=bool(kind and kind["kind"] == "writing to"),
        arguments=kind["args"] if kind and kind["args"] else None, site=_site(lines, own),
    )  # fmt: skip


def _until_blank(lines: list[str]) -> list[str]:
    """A stack trace of CSAN's report: up to its blank line (the program's own traceback follows the report)."""
    end = next((n for n, line in enumerate(lines) if n and (not line.strip() or line.startswith("Traceback"))), None)
    return lines[:end] if end is not None else lines


def parse_races(text: str, own: frozenset[str] = frozenset()) -> list[StreamRace]:
    """Every race CSAN printed in ``text`` (at most MAX_RACES), each access's site among ``own`` files."""
    races: list[StreamRace] = []
    lines = text.splitlines()
    starts = [n for n, line in enumerate(lines) if RACE_HEADER.search(line)]
    for i, start in enumerate(starts[:MAX_RACES]):
        block = lines[start : starts[i + 1] if i + 1 < len(starts) else len(lines)]
        header = RACE_HEADER.search(block[0])
        assert header is not None
        marks = [(n, m) for n, line in enumerate(block) if (m := _ACCESS.match(line.strip()))]
        allocated = next((n for n, line in enumerate(block) if line.startswith("Tensor was allocated")), None)
        if len(marks) < 2:
            continue
        (first, current), (second, previous) = marks[0], marks[1]
        races.append(StreamRace(
            pointer=int(header["pointer"]),
            access=_access(block[first + 1 : second], int(current["stream"]), own),
            previous=_access(block[second + 1 : allocated if allocated is not None else len(block)],
                             int(previous["stream"]), own),
            allocated_at=_site(_until_blank(block[allocated:]), own) if allocated is not None else None,
        ))  # fmt: skip
    return races


def _stream(stream: int) -> str:
    return "the default stream (0)" if stream == 0 else f"stream {stream:#x}"


def _op(access: StreamAccess) -> str:
    name = access.operator.split("(", 1)[0]
    verb = "writes" if access.writes else "reads"
    where = f" at {access.site}" if access.site else ""
    return f"{name} {verb} it on {_stream(access.stream)}{where}"


def describe_race(race: StreamRace) -> str:
    """One sentence: the tensor, the two accesses with their streams and lines, and that nothing orders them."""
    if race.allocated_at and race.allocated_at == race.previous.site:
        tensor = "the tensor made there"  # allocated by the op that wrote it: said once, at that op
    else:
        tensor = f"the tensor allocated at {race.allocated_at}" if race.allocated_at else f"tensor {race.pointer:#x}"
    return (f"torch's CUDA stream sanitizer: {_op(race.previous)} ({tensor}), then {_op(race.access)}, with no "
            f"synchronisation between the two streams")  # fmt: skip
