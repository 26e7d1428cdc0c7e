"""The known-good control next to the user's failing GPU program: which of gpudoctor's own probes exercise the same
stack (from the libraries the command had mapped: Triton's launcher, CuPy, numba-cuda, a torch extension, MAX), run
on the GPU with the same interpreter, so the report can say "the stack runs gpudoctor's kernels here: the fault is
your program's" — or that the stack itself fails — by difference, not by guess."""

from __future__ import annotations

import re

from gpudoctor.examination import RunContext
from gpudoctor.instruments.triage import FailureClass
from gpudoctor.model import Device, ProbeResult
from gpudoctor.protocol import ReproducerDetail
from gpudoctor.suite.catalog import default_probe_dir, load_catalog
from gpudoctor.suite.plan import plan_runs
from gpudoctor.suite.schedule import FaceCallbacks, Schedule, run_schedule

# probe id -> what in a mapped library's path (or the command's text) says the program ran that stack
CONTROLS = {
    "triton": re.compile(r"/triton/|__triton_launcher"),
    "cupy": re.compile(r"/cupy(?:_backends)?/|cupy_backends"),
    "numba-cuda": re.compile(r"/numba_cuda/|/numba/cuda/"),
    "cpp-extension": re.compile(r"/torch_extensions/"),
    "custom-op": re.compile(r"libmax\.so|/modular/lib/|max/engine/"),
    "cuda-graph-arg-lifetime": re.compile(r"/cuda/core/|cuda\.core"),
}
# A failure of the process model (CUDA used across a fork) is confirmed by gpudoctor's own fork probe beside it.
PROCESS_MODEL_CONTROL = "fork-after-init"
FALLBACK = "torch-env"  # torch's own kernels on the GPU, when nothing more specific was mapped


def controls_for(result: ProbeResult) -> list[str]:
    """The control probes for the stacks ``result``'s command used, and for a process-model failure the fork probe."""
    text = "\n".join(result.mapped_libraries) + "\n" + result.stderr_tail
    chosen = [probe for probe, seen in CONTROLS.items() if seen.search(text)]
    chosen = chosen or ([FALLBACK] if re.search(r"libtorch|/torch/", text) else [])
    if result.details.get(ReproducerDetail.FAILURE_CLASS) == FailureClass.PROCESS_MODEL.value:
        chosen = [PROCESS_MODEL_CONTROL, *chosen]
    return chosen


def wants_controls(result: ProbeResult) -> bool:
    """Whether the controls run beside ``result``: it was rerun with the GPU's instruments, or its class is decided
    by a probe of gpudoctor's own (a process-model failure: the fork probe)."""
    failure = result.details.get(ReproducerDetail.FAILURE_CLASS)
    return ReproducerDetail.INSTRUMENTS in result.details or failure == FailureClass.PROCESS_MODEL.value


def run_controls(result: ProbeResult, context: RunContext) -> tuple[ProbeResult, ...]:
    """The control probes' results on the GPU (with what they build on), heard by the faces like any run."""
    if context.environment is None or not (wanted := controls_for(result)):
        return ()
    probe_dir = default_probe_dir()
    planned = plan_runs(
        load_catalog(probe_dir), context.environment, python=context.python, probe_dir=probe_dir,
        only=wanted, devices=(Device.CUDA,),
    )  # fmt: skip
    schedule = Schedule(planned, jobs=context.jobs, cancel=context.cancel)
    run_schedule(schedule, [FaceCallbacks(context.events.start, context.events.result)])
    return schedule.results()
