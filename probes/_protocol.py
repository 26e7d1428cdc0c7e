"""The probe protocol: how a probe script and the doctor's runner talk, in one file both sides import.

The runner imports this as ``gpudoctor.protocol``; probes import the byte-identical copy ``probes/_protocol.py``
(they must run by hand in any interpreter, gpudoctor installed or not; a test keeps the two files equal).
Standard library only; compatible with Python 3.8.

A probe appends JSON lines to the file named by RESULT_FILE_ENV, flushed as they happen: a ``step`` event
before each thing it does (so a crash can be located, and each step timed), then one ``result`` event (also
stamped), then the SHUTDOWN_STEP step just before the interpreter exits (so a crash during teardown is told
apart from one in the probe, and teardown is timed).
"""

from __future__ import annotations

import json
import time
from typing import Any

RESULT_FILE_ENV = "GPUDOCTOR_RESULT_FILE"  # where the probe appends its events
PATCH_FILES_ENV = "GPUDOCTOR_PATCH_FILES"  # files (os.pathsep-separated) to run before the probe: a patch

EVENT_STEP = "step"
EVENT_RESULT = "result"
SHUTDOWN_STEP = "interpreter shutdown"

STATUS_PASS = "pass"
STATUS_SKIP = "skip"
STATUS_FAIL = "fail"
STATUSES = (STATUS_PASS, STATUS_SKIP, STATUS_FAIL)

# Fields of a result event beside "event" and "status".
RESULT_FIELDS = ("summary", "skip_reason", "exception_type", "message", "traceback", "details", "t")


class DetailKey:
    """Detail keys the doctor's own code reads; every one is declared by a probe in catalog.toml."""

    TORCH_CUDA = "torch_cuda"  # the CUDA version torch was built for (torch-env)
    PATCHES_APPLIED = "patches_applied"  # set by the harness itself when the doctor verifies a patch
    RESULTS_CHECKED = "results_checked"  # what a kernel's results were checked against: cpu, reference, none (kernel)
    COMPILE_ERRORS = "compile_errors"  # the Mojo compiler's diagnostics when the package did not build (kernel)


# `gpudoctor kernel`: the probe that runs the user's package, and the control kernel's probe run next to it.
KERNEL_PROBE = "kernel"
CONTROL_PROBE = "custom-op"

# The user's command under `gpudoctor run` and `bisect`: its run id, and the details the doctor adds to its result.
REPRODUCER_RUN_ID = "reproducer"
LOG_RUN_ID = "log"  # a log given to `gpudoctor explain`, read as a failing run
OWN_RUN_IDS = (REPRODUCER_RUN_ID, LOG_RUN_ID)  # a subject's own run, not planned from the catalog: faces add its row
# What the examined environment says of a name a failing run missed (any run: a probe, a command, a log).
MISSING_NAME_DETAIL = "missing_name"


class ReproducerDetail:
    HOST_INDEXING = "mojo_host_indexing"  # lines of Mojo packages beside the script that index from host code
    LEFT_RUNNING = "left_running"  # what the command left running when it ended ({pid, command}), now ended
    INSTRUMENTS = "instruments"  # what the GPU's instruments said on rerunning a failed command
    INSTRUMENTS_NOT_RUN = "instruments_not_run"  # and, for each that could not run, why
    CALL_CHECKS = "call_checks"  # custom-op calls checked against their ops' declarations (gpudoctor.calls)
    FAILURE_CLASS = "failure_class"  # instruments.triage's class of the failure, which chose the experiments
    AT_DEADLINE = "at_deadline"  # a hang examined in place: the GPU's running kernels (cuda-gdb), NVML's view
    GPU_MEMORY = "gpu_memory"  # NVML's compute processes while a run ran out of memory ({gpu, pid, MiB, own})
    BINARIES = "binaries"  # no binary for this GPU: the arch each of the program's binaries was built for
    # every process of the command at a hang's deadline (reproducer.processes): {"processes": [{pid, ppid, command,
    # rank?, local_rank?, world_size?, rank_from?, threads: [{thread, os_thread_id, frames: [{file, line, function}],
    # native}], gpus?: [{gpu, memory_mib}], not_read?}], "total", "not_read", "seconds", "budget_s", "timings_s",
    # "tool" or "note"}; after a run that ended by itself, "seen": the processes it started, as seen while it ran
    PROCESSES = "processes"


# Keys every probe may publish, whatever its catalog entry declares (the harness sets them).
HARNESS_DETAILS = (DetailKey.PATCHES_APPLIED,)


def step_event(name: str) -> dict[str, Any]:
    """A step as it begins; ``t`` is CLOCK_MONOTONIC, which the runner on the same machine shares, so it can
    time each step (and the interpreter's start before the first one) without the probe doing any sums."""
    return {"event": EVENT_STEP, "name": name, "t": time.monotonic()}


def encode(event: dict[str, Any]) -> str:
    """One event as one line of JSON (values that are not JSON become their str)."""
    return json.dumps(event, default=str) + "\n"


def decode(text: str) -> list[dict[str, Any]]:
    """The events in a result file's text; a line cut short by a crash, or anything not an event, is dropped."""
    events: list[dict[str, Any]] = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") in (EVENT_STEP, EVENT_RESULT):
            events.append(event)
    return events
