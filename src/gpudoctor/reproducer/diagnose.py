"""The report of a user's reproducer: the inventory of the interpreter that runs it, its run (gpudoctor.reproducer.
command), and the pre-flight checks, known issues and mechanisms over all of it — the same Report every face shows."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from gpudoctor.doctor import make_report
from gpudoctor.facts.interpreter import resolve_python
from gpudoctor.facts.inventory import collect_environment
from gpudoctor.kernel.scan import scan_package
from gpudoctor.model import Environment, ProbeResult, Report
from gpudoctor.process.cancel import CancelScope
from gpudoctor.reproducer.command import HOST_INDEXING_DETAIL, Reproducer, left_running_finding, run_command

MAX_PACKAGES = 16


def mojo_packages_beside(reproducer: Reproducer) -> list[Path]:
    """The Mojo packages (folders with __init__.mojo) in and below the folder of each script the command names, up
    to two levels down: the custom ops a reproducer loads with CustomOpLibrary usually live there."""
    found: list[Path] = []
    for arg in reproducer.argv:
        script = reproducer.cwd / arg
        if not arg.endswith(".py") or not script.is_file():
            continue
        for marker in sorted(script.parent.glob("__init__.mojo")) + sorted(script.parent.glob("*/__init__.mojo")) + \
                sorted(script.parent.glob("*/*/__init__.mojo")):  # fmt: skip
            if marker.parent not in found and len(found) < MAX_PACKAGES:
                found.append(marker.parent)
    return found


def host_indexing_lines(reproducer: Reproducer) -> list[str]:
    """Every line of those packages' execute() that indexes a tensor from host code (gpudoctor.kernel.scan's static
    scan, as `gpudoctor kernel` runs it): what crashes on a GPU only (seed 000)."""
    lines = []
    for package in mojo_packages_beside(reproducer):
        scan = scan_package(package)
        try:
            where = package.relative_to(reproducer.cwd)
        except ValueError:
            where = package
        lines += [f"{where}/{line.file}:{line.line}: `{line.text}` (op {op.name}, outside foreach)"
                  for op in scan.ops for line in op.host_indexing]  # fmt: skip
    return lines


def diagnose_reproducer(
    reproducer: Reproducer,
    cancel: CancelScope | None = None,
    *,
    on_environment: Callable[[Environment], None] | None = None,
    on_result: Callable[[ProbeResult], None] | None = None,
) -> Report:
    """Inventory, run, diagnose. The interpreter examined is ``reproducer.python`` (default: the one running
    gpudoctor), and it is the one that runs ``python``/``*.py`` in the command. The Mojo packages beside the
    script are scanned as `gpudoctor kernel` scans them."""
    python = resolve_python(reproducer.python)
    environment = collect_environment(python, cancel=cancel)
    if on_environment is not None:
        on_environment(environment)
    result = run_command(dataclasses.replace(reproducer, python=python), cancel)
    if lines := host_indexing_lines(reproducer):
        result = dataclasses.replace(result, details={**result.details, HOST_INDEXING_DETAIL: lines[:20]})
    if on_result is not None:
        on_result(result)
    report = make_report(environment, [result])
    if (left := left_running_finding(result)) is not None:
        report = dataclasses.replace(report, findings=(*report.findings, left))
    return report
