"""What gpudoctor knows about failures: one model (``entry.Explanation``), a failure explained once with when it can
be seen — before a run (``before``), in a run (``match``), over the report — loaded once per process (``load``).

The texts and rules are data (``known_issues.toml``, ``environment.toml``, ``mechanisms.toml`` beside this file); the
Python checks they name are registered in ``checks`` by decorator (``registry``).
"""

from gpudoctor.knowledge.before import preflight
from gpudoctor.knowledge.entry import Explanation, Knowledge
from gpudoctor.knowledge.load import load_knowledge
from gpudoctor.knowledge.match import match_findings
from gpudoctor.protocol import CONTROL_PROBE, KERNEL_PROBE

__all__ = [
    "CONTROL_PROBE",
    "KERNEL_PROBE",
    "Explanation",
    "Knowledge",
    "load_knowledge",
    "match_findings",
    "preflight",
]
