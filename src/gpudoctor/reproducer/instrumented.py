"""The user's failing command rerun with the GPU's own instruments (`gpudoctor run` on a GPU machine): synchronously,
so the traceback names the Python line that launched the failing kernel, and under compute-sanitizer's memcheck with
the caching allocators off, so the kernel, its line, the thread and the access are named. Each rerun is a supervised
child (own group, the run's time limit, bounded capture, the stop path); what an instrument said, or why it could
not run, goes into the result's details for the knowledge to explain."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gpudoctor.facts.sanitizer import find_sanitizer
from gpudoctor.instruments.binaries import binary_archs, source_archs
from gpudoctor.instruments.explain import OpOf, causes
from gpudoctor.instruments.reruns import Instrument, InstrumentedRun, NotRun, plan_reruns
from gpudoctor.instruments.sanitizer import parse
from gpudoctor.instruments.streams import describe_race, parse_races
from gpudoctor.instruments.triage import FailureClass, experiments, program_sources, triage
from gpudoctor.model import Environment, Outcome, ProbeResult
from gpudoctor.process.cancel import Cancelled, CancelScope
from gpudoctor.process.endings import TRACEBACK_FRAME
from gpudoctor.process.supervise import supervise
from gpudoctor.protocol import ReproducerDetail
from gpudoctor.redact import redact_text
from gpudoctor.reproducer.command import Reproducer, command_environment, command_line

CAPTURE_LIMIT = 256 * 1024  # the sanitizer's report: --print-limit keeps it short, the program's own output may not
# Each rerun's limit: the program's own, but no more than this many times what the run itself took (with a floor for
# start-up under the tool): an instrument slows a program down, it does not make a finished one hang.
SLOWDOWN_LIMIT = 20.0
FLOOR_S = 120.0


def rerun_limit(reproducer: Reproducer, result: ProbeResult) -> float:
    return min(reproducer.timeout_s, max(FLOOR_S, result.duration_s * SLOWDOWN_LIMIT))


def _own_files(reproducer: Reproducer) -> frozenset[str]:
    """Base names of the Python files the command names: the sanitizer keeps only base names in its frames."""
    return frozenset(Path(arg).name for arg in reproducer.argv if arg.endswith(".py"))


def raising_line(stderr: str, own: frozenset[str]) -> str | None:
    """The last traceback line in one of the user's files, with its code: where the synchronous rerun raised."""
    lines = stderr.splitlines()
    found = None
    for n, line in enumerate(lines):
        if (match := TRACEBACK_FRAME.match(line)) and Path(match["file"]).name in own:
            code = lines[n + 1].strip() if n + 1 < len(lines) else ""
            found = f"{Path(match['file']).name}:{match['line']}" + (f": `{code}`" if code else "")
    return found


def _one(
    run: InstrumentedRun,
    reproducer: Reproducer,
    env: dict[str, str],
    scope: CancelScope,
    raised_before: str | None,
    limit_s: float,
    op_of: OpOf | None = None,
) -> dict[str, Any]:
    """What one instrument said; ``raised_before``: where the command itself raised (its own traceback)."""
    ended = supervise(
        run.argv, scope.child(), limit_s, env={**env, **run.env}, cwd=reproducer.cwd, capture_limit=CAPTURE_LIMIT,
    ).unless_cancelled()  # fmt: skip
    said: dict[str, Any] = {
        "instrument": run.instrument.value,
        "exit_code": ended.returncode,
        "seconds": round(ended.duration_s, 2),
        "timed_out": ended.timed_out,
    }
    own = _own_files(reproducer)
    if run.instrument is Instrument.SYNCHRONOUS:
        said["raised_at"] = raising_line(ended.stderr.text(), own)
        if raised_before is not None and said["raised_at"] == raised_before:
            said["raised_at_as_before"] = True  # it says nothing the command's traceback did not
    elif run.instrument is Instrument.TORCH_STREAMS:
        races = parse_races(ended.stdout.text() + "\n" + ended.stderr.text(), own)
        said["errors"] = len(races)
        said["found"] = [redact_text(describe_race(race)) for race in races]
        said["causes"] = [{"kind": "stream-race", "line": line} for line in said["found"]]
    else:
        report = parse(ended.stdout.text() + "\n" + ended.stderr.text())
        said["errors"] = report.error_count
        found = [{**cause, "line": redact_text(cause["line"])} for cause in causes(report, own, op_of)]
        said["found"] = [cause["line"] for cause in found]
        said["causes"] = found
        if report.never_used_cuda:
            said["never_used_cuda"] = True  # it ended before its first CUDA call: nothing on the GPU to check
    return said


def rerun_with_instruments(
    reproducer: Reproducer,
    result: ProbeResult,
    environment: Environment,
    cancel: CancelScope | None = None,
    *,
    passing_too: bool = False,
    op_of: OpOf | None = None,
) -> ProbeResult:
    """``result`` with its class of failure (ReproducerDetail.FAILURE_CLASS), what that class's instruments said
    (INSTRUMENTS) or why one did not run (INSTRUMENTS_NOT_RUN). The experiments come from instruments.triage's
    table: a hang is never rerun (it was examined at its deadline), an import error needs no GPU; a command that
    passed is rerun only with ``passing_too`` (`gpudoctor run --sanitize`: memcheck and initcheck, for a read out of
    bounds that still prints a plausible answer)."""
    if result.outcome not in (Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT, Outcome.PASS):
        return result
    sources = program_sources(reproducer.argv, reproducer.cwd)
    failure = triage(result, sources)
    classified = dataclasses.replace(result, details={**result.details, ReproducerDetail.FAILURE_CLASS: failure.value})
    if failure is FailureClass.PASSED and not passing_too:
        return result
    argv = command_line(reproducer)
    env = command_environment(reproducer)
    sites = [Path(p) for p in environment.stack.site_packages or ()]
    runs, not_run = plan_reruns(
        argv,
        env,
        gpus=len(environment.driver.gpus),
        sanitizer=find_sanitizer(env, sites),
        wanted=experiments(failure, sources),
    )
    scope = cancel if cancel is not None else CancelScope()
    said: list[dict[str, Any]] = []
    raised_before = raising_line(result.stderr_tail or "", _own_files(reproducer))
    limit = rerun_limit(reproducer, result)
    for run in runs:
        try:
            said.append(_one(run, reproducer, env, scope, raised_before, limit, op_of))
        except Cancelled:
            break  # the session was stopped: keep what the instruments said so far
        except OSError as error:
            not_run.append(NotRun(run.instrument, f"could not start: {error}"))
    details: dict[str, Any] = {}
    if said:
        details[ReproducerDetail.INSTRUMENTS] = said
    if not_run:
        details[ReproducerDetail.INSTRUMENTS_NOT_RUN] = [f"{n.instrument.value}: {n.why}" for n in not_run]
    if failure is FailureClass.NO_BINARY:
        details[ReproducerDetail.BINARIES] = _binaries(reproducer, result, environment, env)
    return dataclasses.replace(classified, details={**classified.details, **details})


def _binaries(reproducer: Reproducer, result: ProbeResult, environment: Environment, env: dict[str, str]) -> Any:
    """The no-binary class's experiment: the archs the program's own source and libraries were built for, against
    the GPUs'."""
    named = [a for a in reproducer.argv if a.endswith(".py")]
    texts = program_sources(named, reproducer.cwd)
    binaries, why = binary_archs(result.mapped_libraries, env)
    seen: dict[str, Any] = {
        "gpu_archs": sorted(
            {f"sm_{g.compute_capability.replace('.', '')}" for g in environment.driver.gpus if g.compute_capability}
        ),
        "sources": source_archs(zip((Path(a).name for a in named), texts, strict=False)),
        "binaries": binaries,
    }
    if why:
        seen["not_read"] = why
    return seen
