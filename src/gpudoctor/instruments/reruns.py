"""The instrumented reruns of a user's failing command on a GPU: synchronous (every launch waits, so the Python
line that launched the failing kernel is the one in the traceback) and compute-sanitizer's memcheck with the
frameworks' caching allocators off (so an access past a tensor inside a cached block is seen). Pure: it says
what to run and why an instrument cannot run; the supervisor runs it."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudoctor.stackfacts import SANITIZER_INSTALL_HINT as INSTALL_HINT
from gpudoctor.stackfacts import Sanitizer

PRINT_LIMIT = 20  # errors the sanitizer prints in full: the first ones name the culprit, the rest repeat it
HOOKS = Path(__file__).with_name("hooks")
# Each stack's switch for launching synchronously; CUDA_LAUNCH_BLOCKING serves the runtime and driver APIs alike.
SYNCHRONOUS_ENV = {"CUDA_LAUNCH_BLOCKING": "1"}
# MAX's own: its options list (MODULAR_DEBUG, comma-separated; an option a release does not know is ignored with a
# warning) — device-sync-mode waits for each kernel, so its error names the op that faulted, and source-tracebacks
# makes that error name the Python line that built the op, as MAX's own message advises.
MAX_DEBUG_ENV = "MODULAR_DEBUG"
MAX_SYNCHRONOUS_OPTIONS = ("device-sync-mode", "source-tracebacks")


def synchronous_env(env: Mapping[str, str]) -> dict[str, str]:
    """What the synchronous rerun adds to the command's environment: CUDA's switch, and MAX's options appended to
    the user's own MODULAR_DEBUG (never replacing it)."""
    options = [o for o in env.get(MAX_DEBUG_ENV, "").split(",") if o.strip()]
    options += [o for o in MAX_SYNCHRONOUS_OPTIONS if o not in options]
    return {**SYNCHRONOUS_ENV, MAX_DEBUG_ENV: ",".join(options)}


# Caching allocators off: torch by its variable; CuPy's pools by the hook on PYTHONPATH; numba-cuda allocates
# through the driver unless told otherwise. MAX has no documented switch (its buffers stay pooled).
ALLOCATORS_OFF_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
# torch's own checker of what two streams do to one tensor: it records each kernel's reads and writes per stream and
# raises at the first pair no event or synchronisation orders (torch/cuda/_sanitizer.py).
TORCH_STREAMS_ENV = {"TORCH_CUDA_SANITIZER": "1"}


class Instrument(enum.StrEnum):
    SYNCHRONOUS = "synchronous"
    MEMCHECK = "memcheck"
    INITCHECK = "initcheck"
    RACECHECK = "racecheck"
    SYNCCHECK = "synccheck"
    TORCH_STREAMS = "torch-stream-sanitizer"  # torch's CUDA stream sanitizer (TORCH_CUDA_SANITIZER=1)


SANITIZER_TOOLS = (Instrument.MEMCHECK, Instrument.INITCHECK, Instrument.RACECHECK, Instrument.SYNCCHECK)


class SanitizerDetail:
    """The details an instrumented run carries (`gpudoctor kernel --sanitize`; declared in the catalog for the kernel
    and control probes)."""

    TOOL = "sanitizer"  # memcheck, initcheck
    ERRORS = "sanitizer_errors"  # how many errors it counted
    FOUND = "sanitizer_found"  # one line per distinct cause, in the user's words
    CAUGHT = "sanitizer_caught"  # True when it counted any


@dataclass(frozen=True)
class InstrumentedRun:
    instrument: Instrument
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)  # added to the command's own environment


@dataclass(frozen=True)
class NotRun:
    instrument: Instrument
    why: str  # one line for the report, with what to install where that helps


def _with_hooks(env: Mapping[str, str]) -> dict[str, str]:
    python_path = env.get("PYTHONPATH")
    return {"PYTHONPATH": str(HOOKS) + (":" + python_path if python_path else "")}


def plan_reruns(
    argv: Sequence[str],
    env: Mapping[str, str],
    *,
    gpus: int,
    sanitizer: Sanitizer | None,
    wanted: Sequence[Instrument],
) -> tuple[list[InstrumentedRun], list[NotRun]]:
    """How to rerun ``argv`` under each instrument ``wanted`` (instruments.triage's table for the run's class of
    failure), and why any of them cannot run here."""
    if not wanted:
        return [], []
    if gpus == 0:
        why = "no GPU here: the instruments run only where the program's kernels run"
        return [], [NotRun(instrument, why) for instrument in wanted]
    runs: list[InstrumentedRun] = []
    not_run: list[NotRun] = []
    for instrument in wanted:
        if instrument is Instrument.SYNCHRONOUS:
            runs.append(InstrumentedRun(Instrument.SYNCHRONOUS, tuple(argv), synchronous_env(env)))
        elif instrument is Instrument.TORCH_STREAMS:
            runs.append(InstrumentedRun(Instrument.TORCH_STREAMS, tuple(argv), dict(TORCH_STREAMS_ENV)))
        elif sanitizer is None:
            missing = f"compute-sanitizer not found (CUDA_HOME, PATH, pip's wheel): {INSTALL_HINT}"
            not_run.append(NotRun(instrument, missing))
        else:
            command = (sanitizer.path, "--tool", instrument.value, "--print-limit", str(PRINT_LIMIT), *argv)
            runs.append(InstrumentedRun(instrument, command, {**ALLOCATORS_OFF_ENV, **_with_hooks(env)}))
    return runs, not_run
