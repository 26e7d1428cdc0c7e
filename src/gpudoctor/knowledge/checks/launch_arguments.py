"""Report predicates over the launch checks of `gpudoctor run` (gpudoctor.calls.launch_wrap: each Triton launch's
tensors against the launch's device, each CuPy RawKernel launch's arguments against the kernel's C signature, checked
inside the program before the launch). Pure functions of the command's run detail; the kinds are the events' own
(gpudoctor.calls.launch_mismatch.LaunchKind), spelled here so that the knowledge imports nothing of the checks."""

from __future__ import annotations

from typing import Any

from gpudoctor.knowledge.registry import PredicateEvidence, predicate
from gpudoctor.model import Report
from gpudoctor.protocol import REPRODUCER_RUN_ID as RUN_ID
from gpudoctor.protocol import ReproducerDetail

TRITON_KINDS = ("triton-",)  # triton-devices
CUPY_KINDS = ("cupy-",)  # cupy-count, cupy-scalar, cupy-int-width, cupy-host-array, cupy-dtype
LAUNCH_KINDS = TRITON_KINDS + CUPY_KINDS  # a launch's mismatch, not a custom op's (knowledge/checks/calls.py)


def is_launch(mismatch: dict[str, Any]) -> bool:
    """Whether a mismatch of the run's detail is a Triton or CuPy launch's."""
    return str(mismatch.get("kind", "")).startswith(LAUNCH_KINDS)


def _launch_mismatches(report: Report, kinds: tuple[str, ...]) -> list[PredicateEvidence]:
    result = report.result(RUN_ID)
    checks = result.details.get(ReproducerDetail.CALL_CHECKS) if result is not None else None
    if result is None or not isinstance(checks, dict) or not isinstance(checks.get("mismatches"), list):
        return []
    return [(str(m["sentence"]), result.id) for m in checks["mismatches"]
            if isinstance(m, dict) and m.get("sentence") and str(m.get("kind", "")).startswith(kinds)]  # fmt: skip


@predicate("reproducer_triton_launch_devices")
def reproducer_triton_launch_devices(report: Report) -> list[PredicateEvidence]:
    """A Triton launch whose tensors are not all on the device it launches on, named before the launch."""
    return _launch_mismatches(report, TRITON_KINDS)


@predicate("reproducer_cupy_launch_arguments")
def reproducer_cupy_launch_arguments(report: Report) -> list[PredicateEvidence]:
    """A CuPy RawKernel launch whose arguments do not match the kernel's C signature, named before the launch."""
    return _launch_mismatches(report, CUPY_KINDS)
