"""The report of a user's reproducer: the inventory of the interpreter that runs it, its run (gpudoctor.reproducer.
command), and the pre-flight checks, known issues and mechanisms over all of it — the same Report every face shows."""

from __future__ import annotations

import dataclasses

from gpudoctor.cancel import CancelScope
from gpudoctor.doctor import make_report
from gpudoctor.interpreter import resolve_python
from gpudoctor.inventory import collect_environment
from gpudoctor.model import Report
from gpudoctor.reproducer.command import Reproducer, run_command


def diagnose_reproducer(reproducer: Reproducer, cancel: CancelScope | None = None) -> Report:
    """Inventory, run, diagnose. The interpreter examined is ``reproducer.python`` (default: the one running
    gpudoctor), and it is the one that runs ``python``/``*.py`` in the command."""
    python = resolve_python(reproducer.python)
    environment = collect_environment(python, cancel=cancel)
    result = run_command(dataclasses.replace(reproducer, python=python), cancel)
    return make_report(environment, [result])
