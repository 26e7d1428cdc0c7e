"""Version-aware source checks: rules (rules.toml) for Mojo and Python constructs whose acceptance changed
between releases, and the check that applies them to a package (`gpudoctor scan`, `gpudoctor kernel`).
"""

from gpudoctor.kernel.source.check import SourceCheck, SourceHit, changes_between, check_source, translate
from gpudoctor.kernel.source.rules import RuleBook, SourceRule, load_rules, shipped_rules

__all__ = [
    "RuleBook",
    "SourceCheck",
    "SourceHit",
    "SourceRule",
    "changes_between",
    "check_source",
    "load_rules",
    "shipped_rules",
    "translate",
]
