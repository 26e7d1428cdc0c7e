"""A failure's text read by the vocabulary (``knowledge.vocabulary``): which component raised it, which called that
one, in which phase, and what kind of failure it is. A pure function of the text.

Who raised it, in order of evidence: a status that names the layer which returned it (the frames above are its
caller); a tool's own error line (a build driver's frames make it that build's); the innermost frame in an installed
distribution; an exception type; a name only one component prints; among marks of one kind, the last in the text
(the innermost, the exception line) decides. Where none of these names one and no frame of the user's own raised it,
the component a line that says what failed names by its own name ("ptxas failed", "Failed to build cupy").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpudoctor.knowledge.failure_words import reads_as_failure
from gpudoctor.knowledge.vocabulary import COMPILE, UNKNOWN_PHASE, Component, Kind, Mark, Vocabulary

# A traceback frame's file, in the forms tracebacks print: Python's `File "X", line N`, IPython's `File X:N, in` and
# `X in f()` (Python 2's compiled `X.pyc in f()` too), a notebook's `[X](link) in f(`, and gpudoctor's own `X:N in f`
# (knowledge.match.searchable).
_FRAMES = re.compile(
    r'File "(?P<quoted>[^"\n]+)", line \d+'
    r"|File (?P<ipython>[^\s\"]+\.pyx?):\d+, in "
    r"|(?m:^)(?P<old>[~/\w.\\:-]+\.py[xc]?) in (?:\S+\(|<module>)"
    r"|(?m:^)(?P<own>[^\s\"]+\.pyx?):\d+ in \S"
    r"|(?m:^)\[(?P<colab>[^\]\s]+\.pyx?)\]\([^)\s]*\) in \S"  # a notebook's (Colab's) linked frame
)
_INSTALLED = re.compile(
    r"[/\\](?:site|dist)-packages[/\\](?:[\w.+-]+\.egg[/\\])?(?P<package>[A-Za-z0-9_]+)(?:[/\\]|\.py)"
    # a compiled package's Cython source, as its tracebacks name it: relative to the package ("cupy\cuda\device.pyx")
    r"|^(?P<cython>[A-Za-z_]\w*)[/\\][\w/\\]*\.p(?:yx|xd|xi)$"
)
# Python's own library (threading.py, runpy.py, concurrent/futures): never "your program" (an idle thread's frame)
_STDLIB = re.compile(
    r"[/\\]lib[/\\]python\d(?:\.\d+)?[/\\](?!(?:site|dist)-packages)|^<frozen |[/\\]Lib[/\\](?!site-packages)"
)

# Code a library generated and ran: exec'd from a string, or written into a compiler's cache (Inductor's output code
# under /tmp/torchinductor_USER, Triton's cache) — the library's frames, never the user's own
_GENERATED = re.compile(r"^<string>$|[/\\]torchinductor_[^/\\]+[/\\]|[/\\]\.triton[/\\]cache[/\\]")


@dataclass(frozen=True)
class Frame:
    path: str
    at: int  # where in the text: the last one is the innermost


@dataclass(frozen=True)
class Hit:
    mark: Mark
    found: re.Match[str]
    order: int  # the mark's place in the vocabulary: the earlier is the more specific at one place in the text


@dataclass(frozen=True)
class Reading:
    """What the text says: the component that raised the failure (or, where no mark names one, the import name of
    the innermost installed frame's package, or the user's own frame), the component that called it, the phase its
    words show (None: they show none), the kind of failure, and the values its patterns captured."""

    component: Component | None = None
    package: str | None = None
    own_frame: tuple[str, str] | None = None  # (file, line) of the innermost frame outside installed packages
    caller: str | None = None  # the component (in words) that called it, where another raised it
    phase: str | None = None
    kind: Kind | None = None
    values: dict[str, str] = field(default_factory=dict)
    named: bool = False  # the component is read from its own name in a failing line only (the weakest evidence)


def installed_package(path: str) -> str | None:
    """The import name of the installed package a frame's path lies in (a Cython source's path is relative to its
    package: "cupy\\cuda\\device.pyx"); None for a path outside the installed packages."""
    found = _INSTALLED.search(path)
    return None if found is None else found["package"] or found["cython"]


def frames(text: str) -> list[Frame]:
    """The traceback frames in ``text``, outermost first."""
    found = []
    for match in _FRAMES.finditer(text):
        path = next(group for group in match.groups() if group)
        found.append(Frame(path, match.start()))
    return found


def _hits(text: str, vocabulary: Vocabulary, kind: str) -> list[Hit]:
    return [Hit(mark, found, n) for n, mark in enumerate(vocabulary.marks)
            if mark.kind == kind for found in mark.pattern.finditer(text)]  # fmt: skip


def _last(hits: list[Hit]) -> Hit | None:
    """The hit nearest the end of the text (where a traceback raises); at one place, the more specific mark."""
    return max(hits, key=lambda hit: (hit.found.start(), -hit.order), default=None)


def _innermost_frame(text: str, vocabulary: Vocabulary) -> tuple[Component | None, str | None, tuple[str, str] | None]:
    """The innermost installed frame's component (the first frame mark its path matches) or, with none, its package's
    import name; and the innermost frame outside installed packages (the user's own code)."""
    all_frames = frames(text)
    installed = [f for f in all_frames if installed_package(f.path)]
    # code exec'd from a string or written by a compiler into its cache (a launcher a library generates, Inductor's
    # output code) is that library's, never "your program"
    own = [
        f for f in all_frames if not (installed_package(f.path) or _STDLIB.search(f.path) or _GENERATED.search(f.path))
    ]
    own_frame = None
    if own:
        line = re.search(r"line (\d+)|:(\d+)", text[own[-1].at :])
        own_frame = (own[-1].path.replace("\\", "/").rsplit("/", 1)[-1], next(g for g in line.groups() if g) if line
                     else "?")  # fmt: skip
    if not installed:
        return None, None, own_frame
    path = installed[-1].path
    package = installed_package(path)
    if not _INSTALLED.search(path)["package"]:  # type: ignore[index]  # a Cython source: where it is installed
        path = "/site-packages/" + path.replace("\\", "/")
    component = _frame_component(path, vocabulary)
    return component, None if component else package, own_frame


def _frame_component(path: str, vocabulary: Vocabulary) -> Component | None:
    """The component the first frame mark a path matches names (torch's own files: PyTorch)."""
    return next((m.component for m in vocabulary.marks if m.kind == "frame" and m.pattern.search(path)), None)


def innermost_package(text: str, vocabulary: Vocabulary) -> str | None:
    """The import name of the innermost installed frame's package, where no frame mark names a component for it (an
    extension of its own: warpctc_pytorch, not torch)."""
    component, package, _ = _innermost_frame(text, vocabulary)
    return package if component is None else None


def _named(lines: list[str], vocabulary: Vocabulary) -> Hit | None:
    """The component a line that says what failed (``public.error_lines``) names by its own name ("ptxas failed with
    error code 1", "modular: error: ...", "Failed to build cupy"), the last such line's; frames and the code under them
    are not among those lines (a path is not a name: the frames' own reading decides those)."""
    return _last(_hits("\n".join(lines), vocabulary, "named"))


_PATH_IN_LINE = re.compile(r"[^\s'\"(]*[/\\](?:site|dist)-packages[/\\][^\s'\":)]+")


def _installed_in_lines(lines: list[str], vocabulary: Vocabulary) -> tuple[Component | None, str | None]:
    """The installed package a line that says what failed names by its file ("ImportError: …/site-packages/pytorch3d/
    _C.so: undefined symbol …"): the component its frame mark names, else the package's import name — the last such
    line's."""
    paths = [found.group(0) for line in lines for found in _PATH_IN_LINE.finditer(line)]
    for path in reversed(paths):
        if (package := installed_package(path)) is not None:
            component = _frame_component(path, vocabulary)
            return component, None if component else package
    return None, None


def _builder(text: str, vocabulary: Vocabulary, frame_component: Component | None) -> Component | None:
    """A build driver whose marks the text carries (its frames count): the build a compiler's errors belong to."""
    if frame_component is not None and frame_component.builds:
        return frame_component
    return next((m.component for m in vocabulary.marks
                 if m.component.builds and m.kind != "frame" and m.pattern.search(text)), None)  # fmt: skip


def _phase_of(text: str, vocabulary: Vocabulary, present: list[Component], answer: Component | None,
              named: Component | None = None) -> str | None:  # fmt: skip
    """The phase the words show (the first that matches), a compile resolved by the components present (and the one
    named by its name alone, which gives no phase of its own: its usual phase would be a guess on a guess)."""
    word = next((w for w in vocabulary.words if w.pattern.search(text)), None)
    if word is None:  # the component's own phase; else that of another the text names (DLPack's, under CuPy's frames)
        return next((c.phase for c in (answer, *present) if c is not None and c.phase), None)
    if word.phase != COMPILE:
        return word.phase
    present = [*present, named] if named is not None else present
    if any(c.builds for c in present):
        return "build"
    if any(c.compiles == "jit-compile" for c in present):
        return "jit-compile"
    return (answer.compiles if answer is not None else None) or "build"


def _words(component: Component | None, package: str | None) -> str | None:
    return component.name if component is not None else (f"the package {package}" if package else None)


def read(text: str, vocabulary: Vocabulary) -> Reading:
    """What ``text`` says of the failure it shows, by ``vocabulary``."""
    codes = _hits(text, vocabulary, "code")
    telling = [hit for hit in codes if hit.mark.phase or hit.mark.means]  # a family's code says only whose it is
    code = _last(telling) or _last(codes)
    diagnostic = _last(_hits(text, vocabulary, "diagnostic"))
    exception = _last(_hits(text, vocabulary, "exception"))
    name = _last(_hits(text, vocabulary, "name"))
    frame_component, package, own_frame = _innermost_frame(text, vocabulary)
    builder = _builder(text, vocabulary, frame_component)
    present = [h.mark.component for h in (code, diagnostic, exception, name) if h is not None]
    present += [c for c in (frame_component, builder) if c is not None]

    # Who raised it, the status aside: the innermost installed frame, else an exception type, else a name; a tool's
    # own error line before them (it is the build's, where a build driver ran the tool).
    message = next((h for h in (exception, name) if h is not None), None)
    component = frame_component or (message.mark.component if message is not None and package is None else None)
    raised = message if message is not None and component is message.mark.component else None
    caller = None
    if diagnostic is not None and builder is None:
        caller = _words(component, package)
        component, package, raised = diagnostic.mark.component, None, diagnostic
    elif diagnostic is not None:
        component, package = builder, None
    if code is not None and (code.mark.blames == "layer" or (component is None and package is None)):
        caller = _words(component, package)
        component, package, raised = code.mark.component, None, code
    named = None
    if component is None and package is None and own_frame is None:  # nothing else names it: a line that fails may,
        from gpudoctor.knowledge.public import error_lines

        lines = error_lines(text)
        component, package = _installed_in_lines(lines, vocabulary)  # by an installed file it names, or by its name
        named = _named(lines, vocabulary) if component is None and package is None else None
        if named is not None:
            component, raised = named.mark.component, named
    if component is not None and caller == component.name:
        caller = None

    values = {k: v for hit in (code, raised) if hit is not None for k, v in hit.found.groupdict().items() if v}
    answer, by_name = (None, component) if named else (component, None)
    phase = (code.mark.phase if code is not None else None) or _phase_of(text, vocabulary, present, answer, by_name)
    meant = next((h.mark.means for h in (code, raised) if h is not None and h.mark.means), None)
    kind = vocabulary.kinds[meant] if meant else None
    if kind is None:
        for candidate in vocabulary.kinds.values():
            if candidate.pattern is None or (candidate.phases and (phase or UNKNOWN_PHASE) not in candidate.phases):
                continue
            if found := candidate.pattern.search(text):
                kind = candidate
                values.update({k: v for k, v in found.groupdict().items() if v})
                break
    elif kind.pattern is not None and (found := kind.pattern.search(text)):
        values.update({k: v for k, v in found.groupdict().items() if v})
    return Reading(component, package, own_frame, caller, phase, kind, values, named is not None)


def shows_failure(text: str, vocabulary: Vocabulary) -> bool:
    """Whether ``text`` carries a failure's vocabulary: a status an API returned, a tool's error line, an exception
    type, a message that means a kind of failure, a traceback's frames, or the words of a kind of failure — a failure
    even where no line says "error" (Triton's "Passing num_ctas directly to the Triton kernel is not supported", the
    driver's "GPU has fallen off of the bus")."""
    telling = [m for m in vocabulary.marks if m.kind in ("code", "diagnostic", "exception") or m.means]
    if frames(text) or any(m.pattern.search(text) for m in telling):
        return True
    return any(k.pattern is not None and k.pattern.search(text) for k in vocabulary.kinds.values())


# How a pasted text shows it was cut before its error, beside ending in a frame (``frames``) or the code under one: it
# ends in a traceback's header, IPython's `----> 12 f(x)`, a chained exception's separator, or an ellipsis.
_CUT_AT = re.compile(
    r"^\s*-*> ?\d+ |During handling of the above exception|The above exception was the direct cause|"
    r"(?:\.\.\.|\u2026)$|Traceback \(most recent call|\*\*\* Check failure stack trace: \*\*\*|"
    r"[,{\[(\\]\s*$"  # a line that goes on: a structure left open (a JSON error report cut after its message)
)
# An exception line with no message (a bare `KeyError:`): what it was missing comes after it, or in the frames above
_BARE_EXCEPTION = re.compile(r"^\s*[\w.]*(?:Error|Exception)\s*:?\s*$")
_SAID_ERROR = 160  # a held error line's characters, quoted in an experiment


@dataclass(frozen=True)
class Held:
    """The error line a pasted text ends in, and whether that line is all the text is (a quote of it, a title)."""

    line: str
    alone: bool


def held_error(text: str) -> Held | None:
    """The error line a pasted text ends in, where the text holds its error (issue 51: "the failing command's whole
    output" was the generic step, and useless for a text that already is that output): more of the same output would
    say nothing more — or, where the line is all there is, only which layer printed it. None where the text was cut
    before its error — it ends in a traceback's header, a frame or the code under one, an exception with no message —
    or no line of it reads as a failure."""
    from gpudoctor.knowledge.public import error_lines, is_frame_code

    lines = [line for line in text.splitlines()[-400:] if line.strip()]
    if not lines or _CUT_AT.search(lines[-1]) or frames(lines[-1]):
        return None
    if len(lines) > 1 and is_frame_code(lines[-1], lines[-2]):
        return None
    found = error_lines(text)
    if not found or not reads_as_failure(found[-1]) or _BARE_EXCEPTION.match(found[-1]) or _CUT_AT.search(found[-1]):
        return None
    line = found[-1].strip().strip("`*")
    return Held(line if len(line) <= _SAID_ERROR else line[: _SAID_ERROR - 1] + "\u2026", alone=len(lines) == 1)
