"""The Python checks the knowledge entries name, each registered by its decorator (``knowledge.registry``):
environment checks (``environment``, ``building``) and report predicates (``report``, ``runs``, ``calls``,
``launch_arguments``, ``meaning``, ``processes``, ``public_reports``).

Importing this package registers them all; a new check is a function in one of these modules (or a new module
imported here) with ``@check("name")`` or ``@predicate("name")``, and an entry that names it.
"""

from gpudoctor.knowledge.checks import (
    building,
    calls,
    environment,
    launch_arguments,
    meaning,
    processes,
    public_reports,
    report,
    runs,
)

__all__ = [
    "building",
    "calls",
    "environment",
    "launch_arguments",
    "meaning",
    "processes",
    "public_reports",
    "report",
    "runs",
]
