"""The vocabulary of the stack's layers (``vocabulary.toml``): the components that raise errors and the marks their
texts carry, the phases a failure happens in and the words that show them, and what each kind of failure means.
Loaded once per process and validated the way ``knowledge.load`` validates the knowledge files.

A malformed entry is a GpuDoctorError naming the file, the entry and the field, in one line.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.errors import GpuDoctorError
from gpudoctor.knowledge.load import MAX_FILE_BYTES, _one_line
from gpudoctor.knowledge.schema import KindShape, ValidationError, VocabularyShape, convert_vocabulary
from gpudoctor.knowledge.text import placeholders
from gpudoctor.textfile import read_text
from gpudoctor.tomlcheck import parse_toml

VOCABULARY = Path(__file__).with_name("vocabulary.toml")
# In order of evidence: a status an API returned, a tool's own error line, the innermost installed frame, an exception
# type, a name only one component prints, and last the component's own name in a line that says what failed (read
# only where nothing else names one and no frame of the user's own raised it).
MARK_KINDS = ("code", "diagnostic", "frame", "exception", "name", "named")
COMPILE = "compile"  # a word's phase: a build or a compile at run time, as the text's components compile
COMPILES = ("build", "jit-compile")
# The phases gpudoctor's own answer names beside those the words show: it needs them in the file.
UNKNOWN_PHASE = "unknown"  # no word of the text shows the phase: a kind may name it to apply there too
NEEDED_PHASES = ("run", "hang", "exit", UNKNOWN_PHASE, *COMPILES)
# What a template may name beside its pattern's groups (knowledge.answer fills them).
TEMPLATE_NAMES = frozenset(
    {"component", "package", "command", "near", "code", "xids", "xid_next", "reproducer", "held", "call", "releases"}
)
_SOURCE = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull|discussions)/\d+|[\w-]+\.toml#[\w.-]+")
_CIRCLE = "gpudoctor run"


@dataclass(frozen=True)
class Phase:
    """A phase a failure can happen in: what a failure there means and the experiment that decides it (in a report
    of `gpudoctor run`, ``experiment_in_run``; for a pasted text that already holds its whole error, where more of
    the same output would say nothing more, ``experiment_whole``)."""

    id: str
    means: str
    experiment: str
    experiment_in_run: str | None = None
    experiment_whole: str | None = None


@dataclass(frozen=True)
class Component:
    """Who can raise an error: its name, the distributions whose release it is, what a compile by it is, the phase
    its failures are in when the words show none, and whether it drives builds (its compilers' errors are its)."""

    id: str
    name: str
    packages: tuple[str, ...] = ()
    compiles: str | None = None
    phase: str | None = None
    builds: bool = False
    reproducer: str | None = None  # how it writes what it was compiling when it failed (its maintainers' reproducer)
    version: str | None = None  # the command that prints its release, where no Python distribution holds it


@dataclass(frozen=True)
class Mark:
    """A sign only ``component``'s text carries, of one ``kind`` (``MARK_KINDS``)."""

    component: Component
    kind: str
    pattern: re.Pattern[str]
    blames: str = "layer"  # for codes: "caller" when the status says the caller's request failed
    phase: str | None = None
    means: str | None = None  # the Kind the code or message means


@dataclass(frozen=True)
class Word:
    phase: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Kind:
    """What a kind of failure means, and the experiment that decides it."""

    id: str
    means: str
    experiment: str
    pattern: re.Pattern[str] | None = None
    phases: tuple[str, ...] = ()
    near_releases: bool = False
    experiment_in_run: str | None = None


@dataclass(frozen=True)
class Vendor:
    """Another vendor's GPU stack, by the words only its text carries: NVIDIA's instruments do not apply there, and
    ``instead`` names its own."""

    id: str
    name: str
    pattern: re.Pattern[str]
    instead: str


@dataclass(frozen=True)
class Vocabulary:
    phases: dict[str, Phase]
    components: dict[str, Component]
    marks: tuple[Mark, ...]
    words: tuple[Word, ...]
    kinds: dict[str, Kind]
    # how a tool states a cause or a remedy in its own error line ("only applicable on", "requires", "use ...
    # instead", "Please set ..."): each pattern's group "said" is the statement
    statements: tuple[re.Pattern[str], ...] = ()
    vendors: tuple[Vendor, ...] = ()
    # how an experiment for a pasted text that holds its error begins: the whole output ("held_whole"), or one line
    # of it ("held_line"); each fills {error}. The file gives the words; the line alone where it gives none
    held_whole: str = '"{error}"'
    held_line: str = '"{error}"'


@functools.cache
def load_vocabulary(path: Path = VOCABULARY) -> Vocabulary:
    """The vocabulary at ``path``, validated; read once per process."""
    data = parse_toml(path, read_text(path, MAX_FILE_BYTES))
    if not isinstance(data, dict):
        raise GpuDoctorError(f"{path}: not valid TOML")
    try:
        shape = convert_vocabulary(data)
    except ValidationError as error:
        raise GpuDoctorError(f"{path}: {_one_line(str(error), data)}") from None
    return _vocabulary(path, shape)


def _compiled(where: str, text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as error:
        raise GpuDoctorError(f"{where}: field 'pattern' is not a valid regex: {error}") from None


def _unique(path: Path, what: str, ids: list[str]) -> None:
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise GpuDoctorError(f"{path}: {what} {duplicates[0]!r} is declared twice")


def _one_of(where: str, field: str, value: str | None, allowed: object) -> None:
    if value is not None and value not in allowed:  # type: ignore[operator]
        raise GpuDoctorError(f"{where}: field {field!r} must be one of {', '.join(sorted(allowed))}")  # type: ignore[call-overload]


def _sourced(where: str, source: str, text: str) -> None:
    if not _SOURCE.fullmatch(source):
        raise GpuDoctorError(f"{where}: field 'source' must name a report of the field corpora (file.toml#id) or a "
                             "GitHub thread (https://github.com/owner/repo/issues/N)")  # fmt: skip
    if not text.strip():
        raise GpuDoctorError(f"{where}: field 'text' must be a non-empty string")


def _matching_its_text(where: str, pattern: str, source: str, text: str) -> re.Pattern[str]:
    """``pattern`` compiled, where it matches the public ``text`` it came from (from ``source``)."""
    _sourced(where, source, text)
    compiled = _compiled(where, pattern)
    if not compiled.search(text):
        raise GpuDoctorError(f"{where}: field 'pattern' does not match its own 'text'")
    return compiled


def _templates(where: str, texts: dict[str, str | None], names: frozenset[str]) -> None:
    for field, text in texts.items():
        if text is None:
            continue
        try:
            unknown = sorted(set(placeholders(text)) - names)
        except ValueError as error:
            raise GpuDoctorError(f"{where}: field {field!r} is not a template ({error})") from None
        if unknown:
            raise GpuDoctorError(f"{where}: field {field!r} names {{{unknown[0]}}}, which nothing fills")


def _no_circle(where: str, experiment: str, in_run: str | None) -> None:
    """A report of `gpudoctor run` never proposes running it again: an experiment that proposes it has another for
    such a report."""
    if _CIRCLE in experiment and in_run is None:
        raise GpuDoctorError(f"{where}: field 'experiment' proposes {_CIRCLE}: give 'experiment_in_run' for a report "
                             "of a run")  # fmt: skip
    if in_run is not None and _CIRCLE in in_run:
        raise GpuDoctorError(f"{where}: field 'experiment_in_run' proposes {_CIRCLE} in a report of a run")


def _kind(where: str, shape: KindShape, phases: set[str], groups: frozenset[str]) -> Kind:
    _sourced(where, shape.source, shape.text)
    for phase in shape.phases:
        _one_of(where, "phases", phase, phases)
    pattern = _compiled(where, shape.pattern) if shape.pattern is not None else None
    own = frozenset(pattern.groupindex) if pattern is not None else frozenset()
    texts = {"means": shape.means, "experiment": shape.experiment, "experiment_in_run": shape.experiment_in_run}
    _templates(where, texts, TEMPLATE_NAMES | own | groups)
    _no_circle(where, shape.experiment, shape.experiment_in_run)
    return Kind(shape.id, shape.means, shape.experiment, pattern, tuple(shape.phases), shape.near_releases,
                shape.experiment_in_run)  # fmt: skip


def _vocabulary(path: Path, shape: VocabularyShape) -> Vocabulary:
    _unique(path, "phase", [p.id for p in shape.phase])
    _unique(path, "component", [c.id for c in shape.component])
    _unique(path, "kind", [k.id for k in shape.kind])
    phase_ids = {p.id for p in shape.phase}
    missing = [p for p in NEEDED_PHASES if p not in phase_ids]
    if missing:
        raise GpuDoctorError(f"{path}: phase {missing[0]!r} is missing")
    phases = {}
    for n, phase in enumerate(shape.phase):
        where = f"{path}: phase #{n + 1} ({phase.id})"
        _templates(where, {"means": phase.means, "experiment": phase.experiment,
                           "experiment_in_run": phase.experiment_in_run, "experiment_whole": phase.experiment_whole},
                   TEMPLATE_NAMES)  # fmt: skip
        _no_circle(where, phase.experiment, phase.experiment_in_run)
        phases[phase.id] = Phase(phase.id, phase.means, phase.experiment, phase.experiment_in_run,
                                 phase.experiment_whole)  # fmt: skip
    components = {}
    for n, component in enumerate(shape.component):
        where = f"{path}: component #{n + 1} ({component.id})"
        _one_of(where, "compiles", component.compiles, COMPILES)
        _one_of(where, "phase", component.phase, phase_ids)
        components[component.id] = Component(component.id, component.name, tuple(component.packages),
                                              component.compiles, component.phase, component.builds,
                                              component.reproducer, component.version)  # fmt: skip
    kind_ids = {k.id for k in shape.kind}
    marks = []
    for n, mark in enumerate(shape.mark):
        where = f"{path}: mark #{n + 1}"
        _one_of(where, "component", mark.component, components)
        _one_of(where, "kind", mark.kind, MARK_KINDS)
        _one_of(where, "blames", mark.blames, ("layer", "caller"))
        _one_of(where, "phase", mark.phase, phase_ids)
        _one_of(where, "means", mark.means, kind_ids)
        _sourced(where, mark.source, mark.text)
        marks.append(Mark(components[mark.component], mark.kind, _compiled(where, mark.pattern), mark.blames,
                          mark.phase, mark.means))  # fmt: skip
    words = []
    for n, word in enumerate(shape.word):
        where = f"{path}: word #{n + 1}"
        _one_of(where, "phase", word.phase, phase_ids | {COMPILE})
        _sourced(where, word.source, word.text)
        words.append(Word(word.phase, _compiled(where, word.pattern)))
    groups = frozenset(g for m in marks for g in m.pattern.groupindex)  # a code's groups fill the kind it means
    kinds = {k.id: _kind(f"{path}: kind #{n + 1} ({k.id})", k, phase_ids, groups) for n, k in enumerate(shape.kind)}
    statements = []
    for n, statement in enumerate(shape.statement):
        where = f"{path}: statement #{n + 1}"
        compiled = _matching_its_text(where, statement.pattern, statement.source, statement.text)
        if "said" not in compiled.groupindex:
            raise GpuDoctorError(f"{where}: field 'pattern' needs a group named 'said' (the statement)")
        statements.append(compiled)
    _unique(path, "vendor", [v.id for v in shape.vendor])
    vendors = []
    for n, vendor in enumerate(shape.vendor):
        compiled = _matching_its_text(f"{path}: vendor #{n + 1} ({vendor.id})", vendor.pattern, vendor.source,
                                      vendor.text)  # fmt: skip
        vendors.append(Vendor(vendor.id, vendor.name, compiled, vendor.instead))
    held = {}
    for field in ("held_whole", "held_line"):
        text = getattr(shape, field)
        if text is not None:
            _templates(f"{path}: {field}", {field: text}, frozenset({"error"}))
            held[field] = text
    return Vocabulary(phases, components, tuple(marks), tuple(words), kinds, tuple(statements), tuple(vendors), **held)
