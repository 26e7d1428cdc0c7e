"""The version-aware source check: which lines of a kernel package or Python project use constructs that the
installed releases do not accept, which MAX release the code was written for, and what the compiler's
generic diagnostics mean in terms of those constructs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.errors import GpuDoctorError
from gpudoctor.kernel.source.rules import RuleBook, SourceRule, shipped_rules
from gpudoctor.kernelsection import SourceCheckDict, SourceHitDict
from gpudoctor.textfile import read_source

MAX_FILES = 500
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_LINE_CHARS = 160
_SUFFIXES = {".mojo": "mojo", ".🔥": "mojo", ".py": "python"}
_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", ".git", ".venv", "venv", ".pixi", ".magic", "build"}
_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:\d+:)?\s*error:\s*(?P<message>.*)$")


@dataclass(frozen=True)
class SourceHit:
    """One line that uses a rule's construct."""

    rule: SourceRule
    file: str  # relative to the checked root
    line: int
    text: str

    def to_dict(self, installed: Mapping[str, str | None]) -> SourceHitDict:
        version = installed.get(self.rule.package)
        return {
            "rule": self.rule.id,
            "file": self.file,
            "line": self.line,
            "text": self.text,
            "package": self.rule.package,
            "accepted": str(self.rule.accepted),
            "accepted_here": None if version is None else self.rule.accepts(version),
            "rewrite": self.rule.rewrite,
        }

    def statement(self, version: str) -> str:
        """``file:line: `text`: construct, not accepted since max 26.7; write: rewrite``."""
        return (
            f"{self.file}:{self.line}: `{self.text}`: {self.rule.construct}, {self.rule.changed_in(version)}; "
            f"write: {self.rule.rewrite}"
        )


@dataclass(frozen=True)
class SourceCheck:
    """What the check of one folder (or file) found, against the installed versions it was given."""

    files: tuple[str, ...]
    hits: tuple[SourceHit, ...]
    installed: Mapping[str, str | None]  # package -> installed version (None: not installed)
    written_for: tuple[str, ...]  # MAX releases that accept every MAX construct found; () when none say
    conflicts: int  # MAX constructs found that even the best of those releases rejects

    def rejected(self) -> tuple[SourceHit, ...]:
        """The hits whose package is installed at a release that does not accept them."""
        out = []
        for hit in self.hits:
            version = self.installed.get(hit.rule.package)
            if version is not None and not hit.rule.accepts(version):
                out.append(hit)
        return tuple(out)

    def written_for_text(self) -> str | None:
        if not self.written_for:
            return None
        first, last = self.written_for[0], self.written_for[-1]
        span = f"MAX {first}" if first == last else f"MAX {first} - {last}"
        if self.conflicts:
            span += f" (closest: {self.conflicts} construct(s) fit no release)"
        return span

    def to_dict(self) -> SourceCheckDict:
        return {
            "files": list(self.files),
            "installed": dict(self.installed),
            "written_for": list(self.written_for),
            "conflicts": self.conflicts,
            "hits": [h.to_dict(self.installed) for h in self.hits],
        }


def source_files(root: Path) -> Iterator[tuple[Path, str]]:
    """The Mojo and Python files under ``root`` (or ``root`` itself), skipping environments and caches; at most
    MAX_FILES, each with its language."""
    if root.is_file():
        language = _SUFFIXES.get(root.suffix)
        if language:
            yield root, language
        return
    count = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(names):
            language = _SUFFIXES.get(Path(name).suffix)
            if language is None:
                continue
            count += 1
            if count > MAX_FILES:
                return
            yield Path(folder) / name, language


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")  # Mojo and Python alike


def find_hits(root: Path, rules: Sequence[SourceRule]) -> tuple[tuple[str, ...], tuple[SourceHit, ...]]:
    """Every line under ``root`` that uses a rule's construct (comments skipped), with the files read."""
    files, hits = [], []
    base = root if root.is_dir() else root.parent
    for path, language in source_files(root):
        text = read_source(path, MAX_FILE_BYTES)
        if text is None:
            continue
        relative = path.relative_to(base).as_posix()
        files.append(relative)
        lines = text.splitlines()
        mine: list[SourceHit] = []
        for rule in rules:
            if rule.language != language:
                continue
            for match in rule.match.finditer(text):
                start = match.start() + (len(match.group()) - len(match.group().lstrip("\n")))
                number = text.count("\n", 0, start) + 1
                line = lines[number - 1] if number <= len(lines) else ""
                if _is_comment(line):
                    continue
                mine.append(SourceHit(rule, relative, number, line.strip()[:MAX_LINE_CHARS]))
        mine = list({(hit.rule.id, hit.line): hit for hit in mine}.values())  # one per rule and line
        present = {hit.rule.id for hit in mine}
        hits += [hit for hit in mine if not present.intersection(hit.rule.alternatives)]
    hits.sort(key=lambda h: (h.file, h.line, h.rule.id))
    return tuple(files), tuple(hits)


def estimate_release(hits: Sequence[SourceHit], releases: Sequence[str]) -> tuple[tuple[str, ...], int]:
    """The releases that accept every MAX construct in ``hits`` (oldest first) and 0; when none does, the ones
    that reject the fewest, and how many they reject. () when the hits say nothing about MAX."""
    relevant = {hit.rule.id: hit.rule for hit in hits if hit.rule.package == "max"}
    if not relevant or not releases:
        return (), 0
    rejected = {release: sum(not rule.accepts(release) for rule in relevant.values()) for release in releases}
    fewest = min(rejected.values())
    return tuple(r for r in releases if rejected[r] == fewest), fewest


def check_source(root: Path, installed: Mapping[str, str | None], book: RuleBook | None = None) -> SourceCheck:
    """Check every Mojo and Python file under ``root`` against the installed versions of the rules' packages."""
    if not root.exists():
        raise GpuDoctorError(f"{root}: no such file or directory")
    book = book or shipped_rules()
    files, hits = find_hits(root, book.rules)
    written_for, conflicts = estimate_release(hits, book.releases)
    return SourceCheck(files, hits, {p: installed.get(p) for p in book.packages}, written_for, conflicts)


def changes_between(check: SourceCheck, release: str, target: str) -> tuple[SourceHit, ...]:
    """The MAX hits that ``release`` accepts and ``target`` does not: what moving between them touches."""
    return tuple(
        h for h in check.hits if h.rule.package == "max" and h.rule.accepts(release) and not h.rule.accepts(target)
    )


@dataclass(frozen=True)
class Translation:
    """A compiler diagnostic and the construct that explains it."""

    message: str  # the diagnostic's message, without its file:line:col
    hit: SourceHit
    version: str

    def statement(self) -> str:
        rule, said = self.hit.rule, f"{self.hit.file}:{self.hit.line}: {self.message}"
        return (
            f'the compiler\'s "{said}" is `{self.hit.text}`: {rule.construct}, {rule.changed_in(self.version)}; '
            f"write: {rule.rewrite}"
        )


def translate(diagnostics: Sequence[str], check: SourceCheck) -> tuple[Translation, ...]:
    """Each compiler diagnostic that a rejected construct explains: the one on the diagnostic's own line first,
    else one whose rule lists the diagnostic's message among the errors it causes, in the same file."""
    version = check.installed.get("max")
    if version is None:
        return ()
    rejected = check.rejected()
    out = []
    for diagnostic in diagnostics:
        found = _DIAGNOSTIC.match(diagnostic.strip())
        if not found:
            continue
        name, number, message = Path(found["file"]).as_posix(), int(found["line"]), found["message"]
        mine = [h for h in rejected if h.rule.package == "max" and name.endswith(h.file)]
        at_line = [h for h in mine if h.line == number]
        by_message = [h for h in mine if any(p.search(message) for p in h.rule.errors)]
        explained = at_line[:1] or by_message[:1]
        if explained:
            out.append(Translation(message[:300], explained[0], version))
    return tuple(out)


def from_dict(data: SourceCheckDict, book: RuleBook | None = None) -> SourceCheck:
    """A check read back from a report (hits of rules this gpudoctor no longer has are left out)."""
    rules = {rule.id: rule for rule in (book or shipped_rules()).rules}
    hits = tuple(
        SourceHit(rules[h["rule"]], h["file"], h["line"], h["text"]) for h in data["hits"] if h["rule"] in rules
    )
    return SourceCheck(
        tuple(data["files"]), hits, dict(data["installed"]), tuple(data["written_for"]), data["conflicts"]
    )
