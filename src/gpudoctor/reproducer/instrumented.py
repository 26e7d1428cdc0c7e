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
from gpudoctor.instruments.explain import summarise
from gpudoctor.instruments.reruns import Instrument, InstrumentedRun, NotRun, plan_reruns
from gpudoctor.instruments.sanitizer import parse
from gpudoctor.model import Environment, Outcome, ProbeResult
from gpudoctor.process.cancel import Cancelled, CancelScope
from gpudoctor.process.endings import TRACEBACK_FRAME
from gpudoctor.process.supervise import supervise
from gpudoctor.protocol import ReproducerDetail
from gpudoctor.redact import redact_text
from gpudoctor.reproducer.command import Reproducer, command_environment, command_line

CAPTURE_LIMIT = 256 * 1024  # the sanitizer's report: --print-limit keeps it short, the program's own output may not


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
    run: InstrumentedRun, reproducer: Reproducer, env: dict[str, str], scope: CancelScope, raised_before: str | None
) -> dict[str, Any]:
    """What one instrument said; ``raised_before``: where the command itself raised (its own traceback)."""
    ended = supervise(
        run.argv, scope.child(), reproducer.timeout_s, env={**env, **run.env}, cwd=reproducer.cwd,
        capture_limit=CAPTURE_LIMIT,
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
    else:
        report = parse(ended.stdout.text() + "\n" + ended.stderr.text())
        said["errors"] = report.error_count
        said["found"] = [redact_text(line) for line in summarise(report, own)]
    return said


def rerun_with_instruments(
    reproducer: Reproducer,
    result: ProbeResult,
    environment: Environment,
    cancel: CancelScope | None = None,
    *,
    passing_too: bool = False,
) -> ProbeResult:
    """``result`` with what the instruments said (ReproducerDetail.INSTRUMENTS) or why none ran
    (INSTRUMENTS_NOT_RUN). A command that failed, crashed or hung is rerun; one that passed only with
    ``passing_too`` (`gpudoctor run --sanitize`: memcheck and initcheck, for a read out of bounds that still
    prints a plausible answer)."""
    failed = result.outcome in (Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT)
    if not failed and not (passing_too and result.outcome is Outcome.PASS):
        return result
    argv = command_line(reproducer)
    env = command_environment(reproducer)
    sites = [Path(p) for p in environment.stack.site_packages or ()]
    runs, not_run = plan_reruns(
        argv, env, gpus=len(environment.driver.gpus), sanitizer=find_sanitizer(env, sites), exited_cleanly=not failed
    )
    scope = cancel if cancel is not None else CancelScope()
    said: list[dict[str, Any]] = []
    raised_before = raising_line(result.stderr_tail or "", _own_files(reproducer))
    for run in runs:
        try:
            said.append(_one(run, reproducer, env, scope, raised_before))
        except Cancelled:
            break  # the session was stopped: keep what the instruments said so far
        except OSError as error:
            not_run.append(NotRun(run.instrument, f"could not start: {error}"))
    details: dict[str, Any] = {}
    if said:
        details[ReproducerDetail.INSTRUMENTS] = said
    if not_run:
        details[ReproducerDetail.INSTRUMENTS_NOT_RUN] = [f"{n.instrument.value}: {n.why}" for n in not_run]
    return result if not details else dataclasses.replace(result, details={**result.details, **details})
