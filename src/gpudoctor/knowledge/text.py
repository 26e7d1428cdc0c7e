"""The one template filler of the knowledge entries' texts: ``{name}`` is a value the check, the run or the report
gave, and reads "unknown" when none did; ``{name?}`` is left out when none did (with the space before it, or the
whole parenthetical it sits in), so one text reads well before a run and in it.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping

# " (version {driver?})": the parenthetical holding an optional value; " {installed?}": the value alone
_OPTIONAL_PARENTHETICAL = re.compile(r" ?\([^(){}]*\{(\w+)\?\}[^(){}]*\)")
_OPTIONAL = re.compile(r" ?\{(\w+)\?\}")


class _Values(dict[str, str]):
    """Template values; a name nobody gave reads as "unknown" instead of failing."""

    def __missing__(self, key: str) -> str:
        return "unknown"


def fill(template: str, values: Mapping[str, str]) -> str:
    """``template`` with ``values`` in it."""

    def optional(found: re.Match[str]) -> str:
        return found.group(0).replace(f"{{{found[1]}?}}", f"{{{found[1]}}}") if values.get(found[1]) else ""

    text = _OPTIONAL.sub(optional, _OPTIONAL_PARENTHETICAL.sub(optional, template))
    return string.Formatter().vformat(text, (), _Values(values))


def placeholders(template: str) -> list[str]:
    """The names ``template`` fills; a ValueError when its braces are not a template's (a lone "{")."""
    return [name.rstrip("?") for _, name, _, _ in string.Formatter().parse(template) if name]
