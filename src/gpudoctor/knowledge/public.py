"""What public reports already found for the same error: the corpus of resolved threads in ``public_reports/*.toml``
(each with its error lines, the cause and the fix in our words, its address), matched against a failure's own error
lines by their signature — as crash-grouping tools fingerprint an error: numbers, addresses, hex, paths and versions
normalised away, the words weighted by how rare they are in the corpus (a word every CUDA error carries tells nothing).

Loaded lazily, once per process, only for a failing run's text; pure otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor.knowledge.failure_words import reads_as_failure
from gpudoctor.memo import Memo
from gpudoctor.textfile import read_text
from gpudoctor.tomlcheck import parse_toml

FOLDER = Path(__file__).with_name("public_reports")
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_TEXT_LINES = 4000  # a log's lines read for its error lines (its end: where a failure is printed)
# How alike two signatures must be to call them the same error, and how many shared rare words that takes: a
# report whose error only shares "RuntimeError: CUDA error" is not the same error.
SAME_ERROR = 0.55
MIN_SHARED = 3
SHOWN = 5
COMMON = 10  # more reports of one error than this: an error too common to read one cause from
SAME_CAUSE = 0.30  # cosine of two causes' rare words at or above which two threads found the same cause (a proxy)

_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-f]{12,}\b")
_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\w.~+-]*[/\\])+([\w.+-]+)")
_VERSION = re.compile(r"\b\d+(?:\.\d+){1,3}[\w.+-]*")
_NUMBER = re.compile(r"\b\d+\b")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]+")
# Error lines of a text: an exception, a tool's error or fatal line, a failed assertion, a status name.
_ERROR_LINE = re.compile(
    r"(?<![\w.])(?:[\w.]+(?:Error|Exception|Fault)(?:_\w+)?\b|error\b|fatal\b|FAILED|failed|Assertion|CUDA_ERROR_\w+|"
    r"cudaError\w+|NCCL WARN|Xid|undefined symbol|not found|Segmentation fault|core dumped|Killed)",
    re.IGNORECASE,
)
# What an error line names: a quoted name (a module, a symbol, an option, an architecture) or a library's file. Two
# errors that each name something, and nothing in common, are two errors of one shape ("No module named 'triton'" is
# not "No module named 'cupy'"), numbers aside ('compute_86' and 'compute_35' are one error's two arguments).
_NAMED = re.compile(
    r"""['"`\u2018\u201c]([^'"`\s\u2019\u201d]{2,80})['"`\u2019\u201d]|\b(lib[\w+-]+\.so|[\w+-]+\.dll)\b"""
    # the file a path's "No such file or directory" is about, by its own name (a folder THC is not the header THC.h)
    r"""|(?<=[/\\])([\w.+-]{2,80}):\s*No such file or directory"""
)
_STOP = frozenset({"the", "and", "for", "with", "from", "this", "that", "line", "file", "error", "call", "last", "most",
                   "recent", "traceback", "in", "of", "to", "is", "at", "on", "py", "self", "return"})  # fmt: skip


@dataclass(frozen=True)
class PublicReport:
    source: str
    url: str
    date: str
    stack: str
    error: str
    cause: str
    fix: str
    resolved: str
    versions: str = ""

    @property
    def established(self) -> bool:
        """Whether its thread found a cause (an open thread with a guess is the same error, not an answer)."""
        return self.resolved in ("fixed", "workaround", "explained") and not self.cause.startswith("not established")


def names(lines: Iterable[str]) -> frozenset[str]:
    """What the error lines name (quoted, or a library's file), numbers and versions taken out."""
    found = set()
    for line in lines:
        for quoted, library, missing in _NAMED.findall(line):
            name = quoted or library or missing
            name = re.sub(r"\d+", "", _VERSION.sub("", _HEX.sub("", name.lower()))).strip(".:,;()[]")
            if len(name) >= 2:
                found.add(name)
    return frozenset(found)


def signature(lines: Iterable[str]) -> list[str]:
    """The words of error lines with what varies between two reports of one error taken out: hex, numbers, versions,
    folders of paths (a file's name stays), case."""
    words: list[str] = []
    for line in lines:
        text = _HEX.sub(" ", line)
        text = _PATH.sub(lambda m: " " + m[1] + " ", text)
        text = _VERSION.sub(" ", text)
        text = _NUMBER.sub(" ", text)
        words += [w.lower() for w in _WORD.findall(text) if w.lower() not in _STOP]
    return words


# Lines that say a build or a subprocess failed, not why: every failed build prints them (matching on them alone
# would call any two failed builds the same error).
_WRAPPER = re.compile(
    r"ninja: build stopped|Error compiling objects for extension|CalledProcessError|subprocess-exited-with-error|"
    r"Failed building wheel|Could not build wheels|error: command .* failed with exit (?:code|status)|"
    r"note: This error originates from a subprocess|exit code: \d+|ERROR: Failed to build|"
    r"Traceback \(most recent call last\)|During handling of the above exception|"
    r"error: failed to (?:parse the provided Mojo|run the pass manager)"  # the Mojo compiler's: its lines above say why
)
_FRAME_LINE = re.compile(r'^\s*File "[^"]*", line \d+')
# An indented Python statement is a traceback's code line, wherever the frame line above it was cut off.
_CODE_LINE = re.compile(
    r"^\s+(?:raise|return|assert|if|elif|for|while|with|def|class|yield|await)\b|^\s+[\w.]+\s*=[^=]"
)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _code_under_frame(line: str, above: str) -> bool:
    """A frame's code line: indented under it (a Cython frame has none, and the exception follows it unindented)."""
    return _FRAME_LINE.match(above) is not None and _indent(line) > _indent(above)


def is_frame_code(line: str, above: str) -> bool:
    """Whether ``line`` is a traceback's code line (under its frame ``above``, or an indented statement)."""
    return _code_under_frame(line, above) or _FRAME_LINE.match(line) is not None or _CODE_LINE.match(line) is not None


def error_lines(text: str) -> list[str]:
    """The lines of a failure's text that say what failed (its last MAX_TEXT_LINES lines read): not a traceback's
    frames or the code lines under them (`raise CudaAPIError(retcode, msg)` is where, not what), nor a build's
    wrapper lines. A text none of whose lines says so in a failure's words (a pasted title, a tool's one line in its
    own words) is its own error: its last lines."""
    lines = text.splitlines()[-MAX_TEXT_LINES:]
    said = [
        line.strip()
        for n, line in enumerate(lines)
        if line.strip() and not _FRAME_LINE.match(line) and not (n and _code_under_frame(line, lines[n - 1]))
        and not _WRAPPER.search(line) and not _CODE_LINE.match(line)
    ]  # fmt: skip
    found = [line for line in said if _ERROR_LINE.search(line) or reads_as_failure(line)] or said[-3:]
    return list(dict.fromkeys(line[:400] for line in found))[-24:]


@dataclass(frozen=True)
class Corpus:
    reports: tuple[PublicReport, ...]
    vectors: tuple[dict[str, float], ...]
    idf: dict[str, float]
    names: tuple[frozenset[str], ...] = ()
    cause_words: tuple[tuple[str, ...], ...] = ()  # each cause's signature (read with the corpus)

    def vector(self, words: Sequence[str]) -> dict[str, float]:
        counts = Counter(words)
        return _unit({w: (1 + math.log(n)) * self.idf.get(w, self.rare) for w, n in counts.items()})

    @property
    def distinctive(self) -> float:
        """The weight of a word at most 1 % of the reports (and at most 3) share: one such word at least in common."""
        return math.log(1 + len(self.reports) / max(3, len(self.reports) // 100))

    @property
    def rare(self) -> float:
        """The weight of a word no report has (as rare as a word can be)."""
        return math.log(1 + len(self.reports))

    @functools.cached_property
    def _cause_words(self) -> tuple[tuple[str, ...], ...]:
        return self.cause_words or tuple(tuple(signature([r.cause])) for r in self.reports)

    @functools.cached_property
    def _cause_idf(self) -> dict[str, float]:
        documents = Counter(w for ws in self._cause_words for w in set(ws))
        return {w: math.log(1 + len(self._cause_words) / n) for w, n in documents.items()}

    def _cause_vector(self, words: Sequence[str]) -> dict[str, float]:
        idf = self._cause_idf
        return _unit({w: (1 + math.log(n)) * idf.get(w, self.rare) for w, n in Counter(words).items()})

    @functools.cached_property
    def causes(self) -> tuple[dict[str, float], ...]:
        """Each report's cause as weighted words (rare words weigh most), to compare two threads' causes."""
        return tuple(self._cause_vector(ws) for ws in self._cause_words)

    def same_cause(self, one: PublicReport | str, other: PublicReport) -> float:
        """How alike two causes are (0 to 1, by their rare words): SAME_CAUSE and more is one cause. ``one`` is a
        report of the corpus, or a cause in words (a held-out record's, for the bench)."""
        a = self._cause_vector(signature([one])) if isinstance(one, str) else self.causes[self.reports.index(one)]
        b = self.causes[self.reports.index(other)]
        return sum(v * b.get(w, 0.0) for w, v in a.items())

    def nearest(self, lines: Sequence[str], leave_out: int | None = None) -> list[tuple[float, PublicReport]]:
        """The reports whose error is the same as ``lines``' (SAME_ERROR and MIN_SHARED rare words), closest first,
        the newer first among equally close ones."""
        query = self.vector(signature(lines))
        named = names(lines)
        found = []
        for n, (report, vector) in enumerate(zip(self.reports, self.vectors, strict=True)):
            if n == leave_out:
                continue
            shared = [w for w in query if w in vector and self.idf.get(w, 0) > 1.0]
            if len(shared) < MIN_SHARED or not any(self.idf[w] >= self.distinctive for w in shared):
                continue  # "illegal memory access" alone is every faulting kernel's error, not the same error
            theirs = self.names[n]
            if named and theirs and not named & theirs:
                continue  # each names what failed, and not the same thing
            score = sum(query[w] * vector[w] for w in query if w in vector)
            if score >= SAME_ERROR:
                found.append((round(score, 3), report))
        return sorted(found, key=lambda item: (not item[1].established, -item[0], _newest_first(item[1].date)))


def _unit(weights: dict[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(v * v for v in weights.values())) or 1.0
    return {w: v / norm for w, v in weights.items()}


def _newest_first(date: str) -> str:
    return "".join(chr(255 - ord(c)) for c in date)


_FIELDS = ("source", "url", "date", "stack", "error", "cause", "fix", "resolved", "versions")
# The files as read, keyed by their texts' hashes and this module's own (its patterns make the signatures): a warm run
# reads JSON — each thread's fields, its error's signature and the names it carries — not ~2,500 TOML tables.
PARSED = Memo("public-reports", limit=2)
_CODE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _read(paths: Sequence[Path]) -> tuple[list[PublicReport], list[list[str]], list[list[str]], list[list[str]]]:
    """The reports of the files (one per thread), each error's signature, the names it carries and its cause's
    signature."""
    texts = [read_text(path, MAX_FILE_BYTES) for path in paths]
    key = [_CODE, *(hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest() for text in texts)]
    kept = PARSED.get(key)
    if isinstance(kept, dict) and {"reports", "signatures", "names", "causes"} <= kept.keys():
        reports = [PublicReport(**{k: str(r.get(k, "")) for k in _FIELDS}) for r in kept["reports"]]
        return reports, kept["signatures"], kept["names"], kept["causes"]
    items = [item for path, text in zip(paths, texts, strict=True)
             for item in parse_toml(path, text).get("report", [])]  # fmt: skip
    reports = list({r.source: r for r in _reports(items)}.values())  # one entry per thread
    signatures = [signature(r.error.splitlines()) for r in reports]
    named = [sorted(names(r.error.splitlines())) for r in reports]
    causes = [signature([r.cause]) for r in reports]
    with contextlib.suppress(TypeError, ValueError):
        PARSED.put(key, {"reports": [{k: getattr(r, k) for k in _FIELDS} for r in reports],
                         "signatures": signatures, "names": named, "causes": causes})  # fmt: skip
    return reports, signatures, named, causes


def _reports(items: Iterable[Any]) -> list[PublicReport]:
    found = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("error"), str) or not item.get("source"):
            continue
        found.append(PublicReport(**{k: str(item.get(k, "")) for k in _FIELDS}))
    return found


@functools.cache
def load_corpus(folder: Path = FOLDER) -> Corpus:
    """Every report of the folder's TOML files, with its signature's weights (read once per process)."""
    reports, signatures, named, causes = _read(sorted(folder.glob("*.toml")))
    documents = Counter(w for words in signatures for w in set(words))
    idf = {w: math.log(1 + len(reports) / n) for w, n in documents.items()}
    corpus = Corpus(tuple(reports), (), idf)
    vectors = tuple(corpus.vector(words) for words in signatures)
    return Corpus(corpus.reports, vectors, idf, tuple(frozenset(n) for n in named), tuple(map(tuple, causes)))


def said(report: PublicReport) -> str:
    """One line: the thread, when, how it ended, the cause and the fix, in our words."""
    cause = report.cause if report.cause and report.cause != "not established" else "no cause established"
    fix = f"; fixed by {report.fix}" if report.fix and report.fix != "none given" else ""
    return f"{report.source} ({report.date or 'undated'}, {report.resolved or 'open'}): the cause was {cause}{fix}"
