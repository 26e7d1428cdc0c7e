"""What probes reuse between runs: the compile caches of MAX and torch pointed into gpudoctor's cache folder
(``gpudoctor.suite.bytecode.cache_dir``; Python's bytecode too where the environment turned it off), and how long each
run took last time (so the longest start first).

Every cache is content-keyed by its owner (MAX's model IR cache by the graph and compiler, Inductor's by the
graph and torch, the compiled control package by its sources and the MAX version), so a warm run tests the
same stack; a user who sets these variables keeps their own choice. Nothing here may stop a diagnosis: a cache
that cannot be read or written is simply not used.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from gpudoctor import __version__
from gpudoctor.atomic import atomic_write
from gpudoctor.errors import GpuDoctorError
from gpudoctor.model import Outcome, ProbeResult
from gpudoctor.suite.bytecode import cache_dir, keep_probe_bytecode
from gpudoctor.textfile import read_text

DURATIONS_FILE = "durations.json"
# MAX compiles each custom-op graph on its first call (8-12 s for the control kernel on a CPU) unless its model
# IR cache is on; with it, a warm first call takes 1.5 s. Off by default in MAX 26.x.
MAX_MODEL_CACHE_ENV = "MODULAR_MAX_ENABLE_MODEL_IR_CACHE"
# Inductor's default cache is under the temporary folder, which the runner makes private to each probe: without
# this, every torch.compile would start cold.
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
# Inductor compiles in a pool of worker processes, one per CPU, each importing torch: on the H100 machine (16
# CPUs) starting and stopping that pool cost the torch.compile probe 12 s of its 31 s, for a graph of one op.
# One thread compiles such a graph in-process; the probe's subject is the custom op under torch.compile.
INDUCTOR_THREADS_ENV = "TORCHINDUCTOR_COMPILE_THREADS"
# Which gpudoctor runs the probe: the cpp-extension probe keys its kept build by it (probes/_cppbuild.py).
VERSION_ENV = "GPUDOCTOR_VERSION"


def probe_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with the variables that keep the probes' compile caches (MAX's, Inductor's, Python's bytecode
    where the environment turned it off) warm across runs, and gpudoctor's version; variables the user has set
    are kept as they are."""
    env = dict(environ)
    wanted = {MAX_MODEL_CACHE_ENV: "1", INDUCTOR_CACHE_ENV: str(cache_dir() / "inductor"), INDUCTOR_THREADS_ENV: "1"}
    env.update({name: value for name, value in wanted.items() if name not in environ})
    keep_probe_bytecode(env)
    env[VERSION_ENV] = __version__  # always the doctor's own: a cache keyed by it must never outlive it
    return env


@contextlib.contextmanager
def reserved_temp_dir(run_id: str, key: str, fallback: Path) -> Iterator[Path]:
    """The temporary folder a probe run keeps between runs, held exclusively while the block runs.

    MAX builds a source package into the temporary folder, and its compile cache is keyed by that path: a fresh
    folder each run means a cold compile each run (9 s instead of 1.5 s for the control kernel on a CPU). The
    folder is private to one run id and ``key`` (the MAX release, or the interpreter), and locked, so no two
    probes ever share one at once (they would overwrite the package file the other has mapped: SIGBUS).
    ``fallback`` when it is held by another process or cannot be made.
    """
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    name = re.sub(r"[^A-Za-z0-9._-]", "_", run_id) + "-" + digest
    folder = cache_dir() / "tmp" / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = os.open(folder.parent / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        yield fallback
        return
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield fallback
            return
        yield folder
    finally:
        os.close(lock)  # closing releases the lock


def expected_durations() -> dict[str, float]:
    """How long each run id took when it last ran to an end here (empty when unknown or unreadable)."""
    try:
        data = json.loads(read_text(cache_dir() / DURATIONS_FILE, 256 * 1024))
    except (GpuDoctorError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def record_durations(results: Iterable[ProbeResult]) -> None:
    """Remember the durations of runs that ran to an end (not skipped, not interrupted) for the next run."""
    ran = {r.id: round(r.duration_s, 2) for r in results if r.outcome not in (Outcome.SKIPPED, Outcome.INTERRUPTED)}
    if not ran:
        return
    merged = {**expected_durations(), **ran}
    with contextlib.suppress(OSError):
        atomic_write(cache_dir() / DURATIONS_FILE, json.dumps(merged, indent=1, sort_keys=True) + "\n")
