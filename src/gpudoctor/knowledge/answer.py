"""No failure without an answer: for a failing run no entry explains, which component emitted it (the toolchain its
text carries the marks of, else the package of its innermost frame, else the user's own file), in which phase
(import, load, build, launch, run, synchronise), that component's release and whether what it declares holds here,
and the next experiment as a command to copy. Honest by construction: it names no cause."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpudoctor.knowledge.entry import Knowledge
from gpudoctor.model import Environment, Outcome, ProbeResult
from gpudoctor.protocol import LOG_RUN_ID

GENERIC_ID = "not-a-known-failure"

# Which distribution a toolchain is, to read its release and what it declares.
TOOLCHAIN_PACKAGES = {
    "triton": ("triton", "pytorch-triton"),
    "mojo": ("max", "mojo-compiler", "modular"),
    "cupy": ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"),
    "numba": ("numba-cuda", "numba"),
    "torch": ("torch",),
    "cpp-extension": ("torch",),
    "cuda-python": ("cuda-bindings", "cuda-core", "cuda-python", "pycuda"),
}
# An import name in a frame's path -> the distributions it may come from
IMPORT_PACKAGES = {
    "cupy": TOOLCHAIN_PACKAGES["cupy"], "cupy_backends": TOOLCHAIN_PACKAGES["cupy"],
    "numba_cuda": ("numba-cuda",), "cuda": TOOLCHAIN_PACKAGES["cuda-python"], "max": ("max",),
}  # fmt: skip

# The phase a failure happened in, by the words of its text: the first that matches, in this order.
PHASES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("load", re.compile(r"undefined symbol|cannot open shared object file|dlopen|image not found|DLL load failed|"
                        r"Library not loaded|version `[^']+' not found|CUDA_ERROR_(?:SHARED_OBJECT|FILE_NOT_FOUND)")),
    ("import", re.compile(r"ModuleNotFoundError|ImportError|cannot import name|No module named|"
                          r"has no attribute|AttributeError: module ")),
    ("build", re.compile(r"\berror: |CompilationError|Error building extension|nvcc fatal|ptxas|[Cc]ompil(?:e|ation) "
                         r"(?:error|failed)|CalledProcessError|ninja: build stopped|unable to locate module|"
                         r"PTXASError|LLVM ERROR")),
    ("launch", re.compile(r"[Ll]aunch(?:Kernel| failed|ing)|invalid configuration|too many resources|"
                          r"out of resource")),
    ("synchronise", re.compile(r"synchroniz|asynchronously reported|cudaDeviceSynchronize|cuCtxSynchronize")),
)  # fmt: skip
_FRAME_PACKAGE = re.compile(r"[/\\](?:site|dist)-packages[/\\]([A-Za-z0-9_]+)[/\\]")
_USER_FRAME = re.compile(r'File "(?P<file>(?:(?![/\\](?:site|dist)-packages[/\\])[^"])+\.py)", line (?P<line>\d+)')


@dataclass(frozen=True)
class Answer:
    """What gpudoctor can say of a failure it does not know."""

    component: str  # "Triton 3.6.0", "torch 2.11.0", "your program (prog.py:14)"
    phase: str
    requirements: str  # whether what the component declares holds here
    experiment: str  # a command to copy


def phase_of(result: ProbeResult, text: str) -> str:
    if result.outcome is Outcome.CRASH:
        return f"run (the process died of {result.signal or 'a signal'})"
    if result.outcome is Outcome.TIMEOUT:
        return "run (it never ended)"
    return next((phase for phase, words in PHASES if words.search(text)), "run")


def _installed(environment: Environment, names: tuple[str, ...]) -> tuple[str, str] | None:
    return next(((name, v) for name in names if (v := environment.packages.get(name))), None)


def component_of(text: str, environment: Environment, knowledge: Knowledge) -> tuple[str, tuple[str, str] | None]:
    """The component's words and, where it is an installed distribution, (name, version)."""
    toolchain = knowledge.attribute(text)
    if toolchain is not None:
        dist = _installed(environment, TOOLCHAIN_PACKAGES.get(toolchain.id, ()))
        return (f"{toolchain.name}, {dist[0]} {dist[1]}" if dist else toolchain.name), dist
    packages = _FRAME_PACKAGE.findall(text)
    if packages:
        innermost = packages[-1]
        names = IMPORT_PACKAGES.get(innermost, (innermost, innermost.replace("_", "-")))
        dist = _installed(environment, names)
        return (f"{dist[0]} {dist[1]}" if dist else f"the package {innermost}"), dist
    own = _USER_FRAME.findall(text)
    if own:
        file, line = own[-1]
        return f"your program ({file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line})", None
    return "a component the text does not name", None


def requirements_of(dist: tuple[str, str] | None, environment: Environment) -> str:
    if dist is None:
        return "no installed distribution to check"
    unmet = [u for u in environment.stack.requirements_unmet or () if u.package == dist[0]]
    if not unmet:
        return f"what {dist[0]} {dist[1]} declares holds here"
    return "; ".join(str(u) for u in unmet)


def experiment_for(result: ProbeResult, phase: str, text: str) -> str:
    """The next experiment: a command that isolates the phase, or reruns the command with the instruments."""
    command = result.command if result.command and result.id != LOG_RUN_ID else "your command"
    if phase == "import" and (missing := re.search(r"cannot import name '(\w+)' from '([\w.]+)'", text)):
        return f"python -c 'from {missing[2]} import {missing[1]}' (then pip check: which declared requirement breaks)"
    if phase == "import" and (missing := re.search(r"No module named '([\w.]+)'", text)):
        return f"python -c 'import {missing[1]}' (then pip check: which declared requirement breaks)"
    if phase == "load" and (library := re.search(r"(/[^\s:'\"]+\.so[.\d]*)", text)):
        return f"ldd -r {library[1]} (which libraries it resolves, and the symbols it misses)"
    if phase == "build":
        return f"{command} with the build's verbose output (TRITON_DEBUG=1, cpp_extension verbose=True, nvcc -v)"
    if phase.startswith("run (it never ended)"):
        return f"gpudoctor run -- {command} (every thread's stack where it hangs)"
    return f"gpudoctor run -- {command} (on a GPU: rerun synchronously and under compute-sanitizer)"


def _frames_of_one_package(text: str, dist: tuple[str, str]) -> bool:
    """Whether the failing frames in installed packages are all of one package, the distribution ``dist`` (or there
    are none, and the text's marks named it)."""
    packages = set(_FRAME_PACKAGE.findall(text))
    if len(packages) > 1:
        return False
    names = {n.lower() for p in packages for n in IMPORT_PACKAGES.get(p, (p, p.replace("_", "-")))}
    return not packages or dist[0].lower() in names


def bisect_proposal(result: ProbeResult, dist: tuple[str, str], environment: Environment) -> str | None:
    """`gpudoctor bisect --package NAME A..B -- CMD` for the failing package: from the release another installed
    distribution declares (where what it declares is broken here) to the installed one, else from the start of the
    installed one's major line (of the one before, for an X.0 release)."""
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
        major = installed.major if installed.release[1:] != (0,) * len(installed.release[1:]) else installed.major - 1
        if major < 0:
            return None
        other = Version(f"{major}.0")
    low, high = sorted((other, installed))
    command = result.command if result.command and result.id != LOG_RUN_ID else "your command"
    bad = f" --bad {installed}" if installed != high else ""
    return f"gpudoctor bisect --package {name} {low}..{high}{bad} -- {command}"


def answer(result: ProbeResult, text: str, environment: Environment, knowledge: Knowledge) -> Answer:
    component, dist = component_of(text, environment, knowledge)
    phase = phase_of(result, text)
    experiment = experiment_for(result, phase, text)
    if dist is not None and _frames_of_one_package(text, dist):
        bisect = bisect_proposal(result, dist, environment)
        if bisect is not None:  # the releases of the one failing package: where it starts, and what it breaks
            experiment = f"{bisect} (the release of {dist[0]} it starts failing with); or {experiment}"
    return Answer(component, phase, requirements_of(dist, environment), experiment)
