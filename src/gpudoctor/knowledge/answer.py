"""No failure without an answer: for a failing run no entry explains, what the text's own vocabulary says
(``knowledge.reading``): which component raised it and which called it, in which phase (install, build, jit-compile,
import, load, launch, run, synchronise, exit, hang), what that kind of failure means, that component's release and
whether what it declares holds here, and the experiment that decides, as a command to copy. It names no cause the
text does not show, proposes a bisect only where a release change shows (a requirement another distribution declares,
a compiler's bug: its neighbouring releases), and never proposes `gpudoctor run` in a report of a run."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import re
from dataclasses import dataclass

from gpudoctor.knowledge.entry import Knowledge
from gpudoctor.knowledge.reading import Reading, held_error, read
from gpudoctor.knowledge.text import fill
from gpudoctor.knowledge.vocabulary import UNKNOWN_PHASE, Component, Phase, Vocabulary, load_vocabulary
from gpudoctor.model import Environment, Outcome, ProbeResult
from gpudoctor.protocol import LOG_RUN_ID, REPRODUCER_RUN_ID, SHUTDOWN_STEP

GENERIC_ID = "not-a-known-failure"
UNNAMED = "a component the text does not name"
# An import name in a frame's path -> the distributions it may come from, where the names differ
IMPORT_PACKAGES = {
    "cupy": ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"), "numba_cuda": ("numba-cuda",),
    "cuda": ("cuda-bindings", "cuda-core", "cuda-python"),
}  # fmt: skip
# The phase a status's kind means, where the text's words show none (a bare "cuda runtime error (100)")
STATUS_PHASES = {"driver-did-not-initialise": "load", "driver-older-than-runtime": "load", "no-binary-for-gpu": "load",
                 "context-not-made-current": "load", "kernel-fault": "synchronise", "device-assertion": "synchronise",
                 "launch-refused": "launch", "launch-timed-out": "run", "gpu-out-of-memory": "run",
                 "teardown-error": "exit"}  # fmt: skip
NEAR_MINORS = 2  # a compiler's neighbouring releases: this many release lines before the installed one
# An error line that is a CUDA status or a signal: its own experiments (a synchronous rerun, native frames) apply, never
# "the release or the call" of a text that holds its error
_CUDA_OR_SIGNAL = re.compile(
    r"CUDA_ERROR_|cudaError|CUDA (?:driver )?error|cuda runtime error|CUDA(?:Driver|Runtime)Error|CUresult|"
    r"Cuda failure|received signal|Segmentation [Ff]ault|core dumped|Aborted|SIG(?:SEGV|ABRT|BUS|ILL)",
    re.IGNORECASE,
)
# the experiments' NVIDIA instruments, which another vendor's stack (the vocabulary's [[vendor]]) has its own for
_NVIDIA_INSTRUMENTS = re.compile(r"nvidia-smi|compute-sanitizer|CUDA_LAUNCH_BLOCKING|cuda-gdb|\bnvcc\b|ldd -r")


@dataclass(frozen=True)
class Answer:
    """What gpudoctor can say of a failure it does not know."""

    component: str  # "Triton, triton 3.6.0", "the CUDA driver", "your program (prog.py:14)"
    phase: str
    means: str  # what a failure of that kind, in that phase, means
    requirements: str  # whether what the component declares holds here
    experiment: str  # a command to copy
    component_id: str | None = None  # the vocabulary's (or a toolchain's) id; "package:NAME", "own" or None
    caller: str | None = None  # who called the component, where the text shows another: "numba-cuda", "your program"
    said: str | None = None  # the tool's own statement of the cause or the remedy, in its error line
    phase_id: str | None = None  # the vocabulary's phase id ("unknown": no word of the text shows one)

    def line(self) -> str:
        """The answer as one evidence line's words (after the run's id and outcome)."""
        called = f", called from {self.caller}" if self.caller else ""
        during = f"during {self.phase}: {self.means}"
        own = f'; it says itself: "{self.said}"' if self.said else ""
        return f"{self.component}{called}{own}; {during}; {self.requirements}; next: {self.experiment}"


MAX_SAID = 240


def statement(text: str, vocabulary: Vocabulary) -> str | None:
    """The last statement of a cause or a remedy the text's own error lines make (vocabulary's ``statement``), as the
    tool printed it (trimmed)."""
    lines = text.splitlines()[-2000:]
    tail = "\n".join(lines)
    starts = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
    last: tuple[int, int, str] | None = None  # (line, the pattern's place, what it said): the last line's, the last
    for order, pattern in enumerate(vocabulary.statements):  # pattern's on it — each pattern read over the whole tail
        for match in pattern.finditer(tail):
            place = (bisect.bisect_right(starts, match.start()) - 1, order, match["said"])
            last = place if last is None or place[:2] > last[:2] else last
    if last is None:
        return None
    found = last[2].strip().lstrip("#").strip()
    return found if len(found) <= MAX_SAID else found[: MAX_SAID - 1] + "…"


def _installed(environment: Environment, names: tuple[str, ...]) -> tuple[str, str] | None:
    return next(((name, v) for name in names if (v := environment.packages.get(name))), None)


def _component(reading: Reading, text: str, environment: Environment, knowledge: Knowledge,
               vocabulary: Vocabulary) -> tuple[str, str, str | None, tuple[str, str] | None]:  # fmt: skip
    """The component in words (with its release), its name, its id, and (name, version) where it is an installed
    distribution."""
    # the mechanisms' marks: read only where they could decide (no component, or one read from its name alone)
    toolchain = (
        knowledge.attribute(text) if reading.package is None and (reading.component is None or reading.named) else None
    )
    if reading.component is not None and toolchain is None:  # a component named only by its name in a failing line
        component_id, name = reading.component.id, reading.component.name  # yields to the mechanisms' marks
        dist = _installed(environment, reading.component.packages)
    elif reading.package is not None:
        names = IMPORT_PACKAGES.get(reading.package, (reading.package, reading.package.replace("_", "-")))
        dist = _installed(environment, names)
        component_id, name = f"package:{reading.package}", f"the package {reading.package}"
    elif toolchain is not None:  # the mechanisms' marks, where the vocabulary has none
        known = vocabulary.components.get(toolchain.id)
        component_id, name = toolchain.id, toolchain.name
        dist = _installed(environment, known.packages) if known else None
    elif reading.own_frame is not None:
        own = f"your program ({reading.own_frame[0]}:{reading.own_frame[1]})"
        return own, "your program", "own", None
    else:
        return UNNAMED, "the component", None, None
    return (f"{name}, {dist[0]} {dist[1]}" if dist else name), name, component_id, dist


def _phase(result: ProbeResult, reading: Reading) -> tuple[str, str]:
    """The phase in words, and its id."""
    if result.outcome is Outcome.TIMEOUT:
        return "hang (it never ended)", "hang"
    if result.outcome is Outcome.CRASH and result.last_step == SHUTDOWN_STEP:
        return f"exit (the process died of {result.signal or 'a signal'} as the interpreter shut down)", "exit"
    if result.outcome is Outcome.CRASH and reading.phase in (None, "run", "synchronise", "launch"):
        return f"run (the process died of {result.signal or 'a signal'})", "run"
    if reading.phase is None:  # no word shows when: never a run-time fault by default (a build's, an import's?)
        return "a phase the text does not show", UNKNOWN_PHASE
    return reading.phase, reading.phase


def requirements_of(dist: tuple[str, str] | None, environment: Environment) -> str:
    if dist is None:
        return "no installed distribution to check"
    unmet = [u for u in environment.stack.requirements_unmet or () if u.package == dist[0]]
    if not unmet:
        return f"what {dist[0]} {dist[1]} declares holds here"
    return "; ".join(str(u) for u in unmet)


def _command(result: ProbeResult) -> str:
    return result.command if result.command and result.id not in (LOG_RUN_ID,) else "your command"


def near_releases(dist: tuple[str, str] | None, packages: tuple[str, ...], command: str) -> str:
    """The neighbouring releases of a compiler's distribution: a bisect over the release lines just before the
    installed one, or where to read them where it is not installed here (or too early in its line to count back)."""
    from packaging.version import InvalidVersion, Version

    if dist is None:
        return f"its releases: pip index versions {packages[0]}" if packages else "its releases before this one"
    try:
        installed = Version(Version(dist[1]).public)
    except InvalidVersion:
        installed = None
    if installed is None or installed.minor < NEAR_MINORS:
        return f"the releases of {dist[0]} around {dist[1]}: pip index versions {dist[0]}"
    low = Version(f"{installed.major}.{installed.minor - NEAR_MINORS}")
    return f"gpudoctor bisect --package {dist[0]} {low}..{installed} -- {command}"


def releases_to_try(dist: tuple[str, str] | None, packages: tuple[str, ...], command: str,
                    component: Component | None = None) -> str | None:  # fmt: skip
    """The releases to run the same command with, to tell a release's fault from the call's: the failing package's
    newest and the ones before the installed (or the reported) one; a tool's own, where no distribution holds it
    (its ``version`` command). None where the text names no component whose release can be tried."""
    if dist is not None:
        return f"{dist[0]}'s newest release and the ones before {dist[1]} ({near_releases(dist, packages, command)})"
    if packages:
        return (f"{packages[0]}'s newest release and the ones before yours (pip show {packages[0]} gives yours; "
                f"pip index versions {packages[0]} lists them)")  # fmt: skip
    if component is not None and component.version:
        return f"{component.name}'s newest release and the one before yours (yours: {component.version})"
    return None


def _frames_of_one_package(text: str, dist: tuple[str, str]) -> bool:
    """Whether the failing frames in installed packages are all of one package, the distribution ``dist`` (or there
    are none, and the text's marks named it)."""
    from gpudoctor.knowledge.reading import frames, installed_package

    packages = {package for f in frames(text) if (package := installed_package(f.path))}
    if len(packages) > 1:
        return False
    names = {n.lower() for p in packages for n in IMPORT_PACKAGES.get(p, (p, p.replace("_", "-")))}
    return not packages or dist[0].lower() in names


def bisect_proposal(result: ProbeResult, dist: tuple[str, str], environment: Environment) -> str | None:
    """`gpudoctor bisect --package NAME A..B -- CMD` for the failing package where the environment shows a release
    change: another installed distribution declares a release of it that is not the installed one. None otherwise:
    a bisect over a whole version range is never the default."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    name, installed_text = dist
    try:
        installed = Version(Version(installed_text).public)
    except InvalidVersion:
        return None
    declared = []
    for unmet in environment.stack.requirements_unmet or ():
        if unmet.needs.lower() == name.lower():
            try:
                declared += [Version(s.version) for s in Requirement(unmet.requirement).specifier]
            except (InvalidRequirement, InvalidVersion):
                continue
    other = next((v for v in sorted(declared) if v != installed), None)
    if other is None:
        return None
    low, high = sorted((other, installed))
    bad = f" --bad {installed}" if installed != high else ""
    return f"gpudoctor bisect --package {name} {low}..{high}{bad} -- {_command(result)}"


def _packages_of(reading: Reading, component_id: str | None, vocabulary: Vocabulary, text: str) -> tuple[str, ...]:
    """The distributions the failing component's release is (the vocabulary's, a frame's package's), those the text
    names first (PyCUDA's frames: pycuda, not cuda-bindings)."""
    if reading.component is not None:
        packages = reading.component.packages
    elif reading.package is not None:
        packages = IMPORT_PACKAGES.get(reading.package, (reading.package.replace("_", "-"),))
    else:
        known = vocabulary.components.get(component_id or "")
        packages = known.packages if known is not None else ()
    lowered = text.lower()
    named = [p for p in packages if re.search(rf"(?<![\w-]){re.escape(p.replace('-', '_'))}(?![\w-])|"
                                               rf"(?<![\w-]){re.escape(p)}(?![\w-])", lowered)]  # fmt: skip
    return tuple(dict.fromkeys([*named, *packages]))


def _whole_text_values(text: str, reading: Reading, component_id: str | None, dist: tuple[str, str] | None,
                       command: str, vocabulary: Vocabulary) -> dict[str, str] | None:  # fmt: skip
    """The values of a phase's ``experiment_whole`` where the pasted text holds its error (not a CUDA status's or a
    signal's, whose own experiments apply) and names a component whose release can be tried; None otherwise."""
    held = held_error(text)
    if held is None or _CUDA_OR_SIGNAL.search(held.line):
        return None
    packages = _packages_of(reading, component_id, vocabulary, text)
    releases = releases_to_try(dist, packages, command, vocabulary.components.get(component_id or ""))
    if releases is None:
        return None
    call = f"your call at {reading.own_frame[0]}:{reading.own_frame[1]}" if reading.own_frame else None
    return {"held": fill(vocabulary.held_line if held.alone else vocabulary.held_whole, {"error": held.line}),
            "call": call or "the program's call into it", "releases": releases}  # fmt: skip


def answer(result: ProbeResult, text: str, environment: Environment, knowledge: Knowledge,
           vocabulary: Vocabulary | None = None) -> Answer:  # fmt: skip
    from gpudoctor.knowledge.codes import bare_status, xid_values

    vocabulary = vocabulary or load_vocabulary()
    from_log = result.id == LOG_RUN_ID
    cuda = environment.stack.torch_cuda if not from_log else None
    if from_log:  # a pasted log: the reporter's releases, as its text gives them, never this machine's
        from gpudoctor.facts.reported import reported

        given = reported(text)
        cuda = given.torch_cuda
        stack = dataclasses.replace(environment.stack, requirements_unmet=None)
        environment = dataclasses.replace(environment, packages=dict(given.packages), stack=stack)
    reading = read(text, vocabulary)
    component, name, component_id, dist = _component(reading, text, environment, knowledge, vocabulary)
    status = bare_status(text, cuda, environment.packages.get("torch"))  # "cuda runtime error (100)": which status
    if reading.phase is None and status is not None and status[1] in STATUS_PHASES:
        reading = dataclasses.replace(reading, phase=STATUS_PHASES[status[1]])
    phase_words, phase_id = _phase(result, reading)
    phase: Phase = vocabulary.phases[phase_id]
    kind = reading.kind
    if kind is None and status is not None and status[1] is not None:
        kind = vocabulary.kinds[status[1]]
    in_run = result.id == REPRODUCER_RUN_ID  # a report of `gpudoctor run`: the command already ran, instrumented
    command = _command(result)
    values = {**reading.values, "component": name, "command": command, "package": dist[0] if dist else name,
              **xid_values(text)}  # fmt: skip
    if reading.component is not None and reading.component.reproducer:
        values["reproducer"] = reading.component.reproducer
    if kind is not None and kind.near_releases:
        packages = reading.component.packages if reading.component is not None else ()
        values["near"] = near_releases(dist, packages, command)
    means = fill(kind.means if kind is not None else phase.means, values)
    if status is not None and not reading.values.get("message"):  # a number without its words: named first
        means = f"{status[0]}: {means}"
    own, in_run_own = (kind.experiment, kind.experiment_in_run) if kind else (phase.experiment, phase.experiment_in_run)
    if from_log and kind is None and status is None and phase.experiment_whole:
        whole = _whole_text_values(text, reading, component_id, dist, command, vocabulary)
        if whole is not None:  # the pasted text holds its error: the release, or the call, decides
            own = phase.experiment_whole
            values.update(whole)
    experiment = fill(in_run_own if in_run and in_run_own else own, values)
    if dist is not None and _frames_of_one_package(text, dist):
        bisect = bisect_proposal(result, dist, environment)
        if bisect is not None:  # another installed distribution declares another release: where it starts failing
            experiment = f"{bisect} (the release of {dist[0]} it starts failing with); or {experiment}"
    vendor = next((v for v in vocabulary.vendors if v.pattern.search(text)), None)
    if vendor is not None and _NVIDIA_INSTRUMENTS.search(experiment):  # another vendor's GPU: its own instruments
        experiment = f"{experiment} — on {vendor.name}, NVIDIA's instruments do not apply: {vendor.instead}"
    caller = reading.caller
    if caller is None and reading.own_frame is not None and component_id != "own":
        caller = f"your program ({reading.own_frame[0]}:{reading.own_frame[1]})"
    requirements = requirements_of(dist, environment)
    if from_log:
        requirements = f"{dist[0]} {dist[1]} as the log gives it" if dist else "the log gives no release of it"
    return Answer(component, phase_words, means, requirements, experiment, component_id, caller,
                  statement(text, vocabulary), phase_id)  # fmt: skip
