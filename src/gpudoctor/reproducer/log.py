"""A log or a pasted traceback (`gpudoctor explain`): read as untrusted input — bounded, regular files or stdin
only, text in UTF-8 or refused in one line — and turned into the failing run the knowledge reads: the parts of the
log around its errors (the end of a long CI log is often cleanup, not the failure), private tokens redacted."""

from __future__ import annotations

import bisect
import itertools
import sys
from pathlib import Path

from gpudoctor.errors import GpuDoctorError
from gpudoctor.knowledge.failure_words import ERROR_LINE
from gpudoctor.model import Device, Outcome, ProbeResult
from gpudoctor.protocol import LOG_RUN_ID
from gpudoctor.redact import redact_text
from gpudoctor.textfile import read_bytes

MAX_LOG_BYTES = 64 * 1024 * 1024  # a CI job's whole log; more is not a log to paste
KEPT_BYTES = 32 * 1024  # what the knowledge reads of it: the windows around its errors (a longer text is read there)
WINDOW_LINES = 30


def read_log(source: str) -> tuple[str, str]:
    """The log's text and how to name it: ``-`` is standard input. One-line GpuDoctorError for what is not a
    readable text log: too large, binary (NUL bytes), not UTF-8, not a regular file."""
    if source == "-":
        data = sys.stdin.buffer.read(MAX_LOG_BYTES + 1)
        if len(data) > MAX_LOG_BYTES:
            raise GpuDoctorError(f"standard input: larger than {MAX_LOG_BYTES // 2**20} MiB; not read")
        name = "standard input"
    else:
        data = read_bytes(Path(source), MAX_LOG_BYTES)
        name = Path(source).name
    if b"\x00" in data:
        raise GpuDoctorError(f"{name}: binary data (NUL bytes), not a text log")
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError as failure:
        raise GpuDoctorError(f"{name}: not UTF-8 text (byte {failure.start})") from None


def relevant_part(text: str, limit: int = KEPT_BYTES) -> str:
    """All of ``text`` when it is short; else the windows around its error lines, the last ones first, up to
    ``limit`` characters (the tail when no line looks like an error)."""
    if len(text) <= limit:
        return text
    lines = text.split("\n")
    offsets = list(itertools.accumulate(len(line) + 1 for line in lines))  # where each line ends
    hits = sorted({bisect.bisect_right(offsets, found.start()) for found in ERROR_LINE.finditer(text)})
    if not hits:
        return text[-limit:]
    kept: set[int] = set()
    size = 0
    for hit in reversed(hits):
        window = range(max(0, hit - WINDOW_LINES), min(len(lines), hit + WINDOW_LINES))
        new = [n for n in window if n not in kept]
        cost = sum(len(lines[n]) + 1 for n in new)
        if size + cost > limit:
            break
        kept.update(new)
        size += cost
    return "\n".join(lines[n][:4000] for n in sorted(kept)) or text[-limit:]


NO_FAILURE = "no failure found in this log"


def log_result(text: str, name: str) -> ProbeResult:
    """The log as a failing run: its error lines are what the knowledge reads. A log none of whose lines reads as
    an error is still read whole (the runtime's "CUDA driver version is insufficient ..." carries no such word): its
    last line stands for it, and the subject says "no failure found" when nothing in the knowledge explains it."""
    part = redact_text(relevant_part(text))
    errors = [line.strip() for line in part.splitlines() if ERROR_LINE.search(line)]
    last = next((line.strip() for line in reversed(part.splitlines()) if line.strip()), "")
    summary = (errors[-1] if errors else last or "an empty log")[:300]
    again = f"gpudoctor explain {name if name != 'standard input' else '-'}"
    return ProbeResult(
        id=LOG_RUN_ID, probe=LOG_RUN_ID, device=Device.NONE, outcome=Outcome.FAIL, duration_s=0.0,
        summary=f"{name}: {summary}", stderr_tail=part, command=again,
    )  # fmt: skip
