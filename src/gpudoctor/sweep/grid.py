"""What a sweep examines: the grid of cells (torch x MAX x Python), from lists, ranges over released versions,
a TOML grid file, or by default the package index's newest releases; and what each cell came to.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from gpudoctor.errors import GpuDoctorError
from gpudoctor.tomlcheck import checked_table, read_toml

GRID_FIELDS = {"torch", "max", "python"}
MAX_GRID_FILE_BYTES = 64 * 1024
MAX_CELLS = 1000
DEFAULT_LINES = 3  # a package the grid leaves out: the newest release of each of its newest three lines (x.y)


@dataclass(frozen=True, order=True)
class Cell:
    """One environment of the grid: exact torch and MAX versions, and the Python it runs on. A package bisect's
    cell is instead one release of ``package`` over the examined environment's other distributions (``pins``,
    requirement lines), installed as pip would install it: over what the others declare (see ``overrides``)."""

    torch: str
    max: str
    python: str
    package: str = ""  # a package bisect's cell: the distribution under test, at ``version``
    version: str = ""
    pins: tuple[str, ...] = ()  # everything else, as the examined environment has it

    @classmethod
    def of_release(cls, package: str, version: str, python: str, pins: Sequence[str]) -> Cell:
        return cls("", "", python, package, version, tuple(pins))

    @property
    def key(self) -> str:
        """A file-name-safe name for the cell: py3.11_torch-2.13.0_max-26.7.0, or py3.11_triton-3.3.0_env-1a2b3c4d
        (the hash of the pins: another environment is another cell)."""
        if self.package:
            pins = hashlib.sha256("\n".join(self.pins).encode()).hexdigest()[:12]
            return f"py{self.python}_{re.sub(r'[^A-Za-z0-9.]+', '_', self.package)}-{self.version}_env-{pins}"
        return f"py{self.python}_torch-{self.torch}_max-{self.max}"

    @property
    def release(self) -> str:
        """The release the cell stands for in a bisect: the package's, else MAX's."""
        return self.version if self.package else self.max

    def requirements(self) -> dict[str, str]:
        if self.package:
            return {self.package: self.version}
        return {"torch": self.torch, "max": self.max}

    def overrides(self) -> list[str]:
        """A package cell's requirement lines, each also an override (uv ``--overrides``): the release under test
        and every pin win over what any distribution declares, as pip installs what it is told, with a warning."""
        return [*self.pins, f"{self.package}=={self.version}"] if self.package else []

    def to_dict(self) -> dict[str, Any]:
        grid = {"torch": self.torch, "max": self.max, "python": self.python}
        if not self.package:
            return grid
        return {**grid, "package": self.package, "version": self.version, "pins": list(self.pins)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Cell:
        pins = data.get("pins", ())
        return cls(str(data["torch"]), str(data["max"]), str(data["python"]), str(data.get("package", "")),
                   str(data.get("version", "")), tuple(str(p) for p in pins if isinstance(pins, list)))  # fmt: skip


class CellStatus(str, enum.Enum):
    """What a cell came to."""

    HEALTHY = "healthy"  # every probe that ran passed and no problem was found
    PROBLEM = "problem"  # a probe failed, crashed or timed out, or a problem finding matched
    UNRESOLVABLE = "unresolvable"  # its packages cannot be installed together (the resolver says why)
    BUILD_FAILED = "build-failed"  # the environment could not be built for another reason
    INTERRUPTED = "interrupted"  # the sweep was stopped before the cell ended
    LOST = "lost"  # `sweep --ray`: the node examining the cell died


@dataclass(frozen=True)
class CellResult:
    cell: Cell
    status: CellStatus
    reason: str = ""  # the resolver's or builder's words, or what the doctor found
    findings: tuple[str, ...] = ()  # ids of the problem findings
    problems: tuple[str, ...] = ()  # run ids that failed, crashed or timed out
    installed: Mapping[str, str | None] = field(default_factory=dict)  # what the environment really has
    report: str | None = None  # the cell's report file, relative to the sweep folder
    duration_s: float = 0.0
    reused: bool = False  # taken from an earlier sweep (no --refresh)
    request: Mapping[str, Any] = field(default_factory=dict)  # how it was examined: kept only for the same

    def to_dict(self) -> dict[str, Any]:
        return {
            "cell": self.cell.to_dict(),
            "status": self.status.value,
            "reason": self.reason,
            "findings": list(self.findings),
            "problems": list(self.problems),
            "installed": dict(self.installed),
            "report": self.report,
            "duration_s": round(self.duration_s, 1),
            "reused": self.reused,
            "request": dict(self.request),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CellResult:
        return cls(
            cell=Cell.from_dict(data["cell"]),
            status=CellStatus(data["status"]),
            reason=str(data.get("reason", "")),
            findings=tuple(str(f) for f in data.get("findings", ())),
            problems=tuple(str(p) for p in data.get("problems", ())),
            installed={str(k): None if v is None else str(v) for k, v in dict(data.get("installed", {})).items()},
            report=None if data.get("report") is None else str(data["report"]),
            duration_s=float(data.get("duration_s", 0.0)),
            reused=bool(data.get("reused", False)),
            request=dict(data.get("request", {})),
        )


# --- the grid from the command line or a file --------------------------------------------------------

ReleaseLister = Callable[[str], Sequence[Version]]


def released_versions(name: str, python: str = sys.executable) -> list[Version]:
    """Every release of ``name`` the package index offers, oldest first (asked with pip, so the user's own
    index configuration applies)."""
    try:
        completed = subprocess.run(
            [python, "-m", "pip", "index", "versions", name],
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GpuDoctorError(f"cannot list the releases of {name}: {error}") from error
    match = re.search(r"Available versions:\s*(.+)", completed.stdout)
    if completed.returncode != 0 or match is None:
        raise GpuDoctorError(
            f"cannot list the releases of {name} from the package index: {_why_unlisted(completed.stderr)}",
            hint="give exact versions (2.13.0), not lines or ranges",
        )
    versions = []
    for text in match.group(1).split(","):
        try:
            versions.append(Version(text.strip()))
        except InvalidVersion:
            continue
    return sorted(v for v in versions if not v.is_prerelease)


# What pip says (among its retries) when no index answered: a refused or timed-out connection, an unknown host.
_UNREACHABLE = re.compile(
    r"Failed to establish a new connection: [^\"')]+|Temporary failure in name resolution|Name or service not known"
    r"|No address associated with hostname|Read timed out|Connection to \S+ timed out|Could not fetch URL [^\n]+"
)


def _why_unlisted(stderr: str) -> str:
    """pip's reason in one line: that the index could not be reached (pip only says "No matching distribution" in
    the end), else its last line."""
    unreachable = _UNREACHABLE.findall(stderr)
    if unreachable:
        return f"the index cannot be reached ({unreachable[-1].strip()})"
    return (stderr.strip().splitlines() or ["no answer"])[-1].strip()


def wheelhouse_releases(folders: Sequence[Path], name: str) -> list[Version]:
    """Every release of ``name`` that has a wheel in these folders (a wheelhouse for offline sweeps), oldest first;
    wheel file names spell the distribution with underscores (PEP 427)."""
    wanted = re.sub(r"[-_.]+", "_", name).lower()
    versions = set()
    for folder in folders:
        try:
            names = os.listdir(folder)
        except OSError as error:
            raise GpuDoctorError(f"--find-links {folder}: {error.strerror or error}") from None
        for file in names:
            parts = file.split("-")
            if file.endswith(".whl") and len(parts) >= 5 and re.sub(r"[-_.]+", "_", parts[0]).lower() == wanted:
                try:
                    versions.add(Version(parts[1]))
                except InvalidVersion:
                    continue
    return sorted(v for v in versions if not v.is_prerelease)


def release_lister(find_links: Sequence[Path], offline: bool) -> ReleaseLister:
    """Where releases are listed from: the package index, plus the wheelhouses given; with ``offline``, the
    wheelhouses alone."""

    def releases(name: str) -> list[Version]:
        found = set(wheelhouse_releases(find_links, name)) if find_links else set()
        if not offline:
            found |= set(released_versions(name))
        return sorted(found)

    return releases


def _version(text: str, what: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise GpuDoctorError(f"--{what}: not a version: {text!r}") from None


def expand_versions(spec: str | Sequence[str], name: str, releases: ReleaseLister) -> list[str]:
    """Versions from ``2.6,2.9,2.13.0`` (a line like 2.6 means its newest release) or ``25.3..26.7``
    (every release in between, both ends included), or a list of such items."""
    items = [spec] if isinstance(spec, str) else list(spec)
    parts = [p.strip() for item in items for p in str(item).split(",") if p.strip()]
    if not parts:
        raise GpuDoctorError(f"--{name}: no versions given")
    chosen: list[str] = []
    for part in parts:
        if ".." in part:
            low_text, _, high_text = part.partition("..")
            low, high = _version(low_text, name), _version(high_text, name)
            if low > high:
                raise GpuDoctorError(f"--{name} {part}: the range runs backwards")
            upper = line_end(high) if len(high.release) < 3 else high
            found = [v for v in releases(name) if low <= v <= upper]
            if not found:
                raise GpuDoctorError(f"--{name} {part}: no release of {name} in that range")
            chosen += [str(v) for v in found]
        elif len(_version(part, name).release) >= 3:
            chosen.append(part)
        else:
            line = _version(part, name)
            found = [v for v in releases(name) if v.release[: len(line.release)] == line.release]
            if not found:
                raise GpuDoctorError(f"--{name} {part}: no release of {name} on that line")
            chosen.append(str(found[-1]))
    return list(dict.fromkeys(chosen))


def newest_lines(name: str, releases: ReleaseLister, count: int = DEFAULT_LINES) -> list[str]:
    """The newest release of each of the newest ``count`` lines (x.y) of ``name``, oldest first: 2.13.0, 2.14.1,
    2.15.0. A build's local label is left out (2.13.0+cpu counts as 2.13.0): ``==2.13.0`` installs whichever build
    of it the indexes offer."""
    newest: dict[tuple[int, ...], Version] = {}
    for release in releases(name):
        public = Version(release.public)
        line = public.release[:2]
        if line not in newest or public > newest[line]:
            newest[line] = public
    if not newest:
        raise GpuDoctorError(f"no release of {name} found")
    return [str(newest[line]) for line in sorted(newest)[-count:]]


def default_versions(name: str, releases: ReleaseLister, count: int = DEFAULT_LINES) -> list[str]:
    """What a sweep examines of ``name`` when its grid leaves it out: the index's newest lines (see newest_lines),
    asked now, so the default moves with the releases; when the index cannot tell, one error saying how to name
    the versions instead."""
    try:
        return newest_lines(name, releases, count)
    except GpuDoctorError as error:
        raise GpuDoctorError(
            f"the default grid (no --{name}) follows the newest releases: {error.message}",
            hint=f"give --{name} exact versions (x.y.z: they need no index), or point pip at an index that answers "
            "(PIP_INDEX_URL, PIP_FIND_LINKS) or --find-links at a wheelhouse",
        ) from None


def line_end(version: Version) -> Version:
    """The largest version on a line: 26.7 -> 26.7.999999."""
    return Version(".".join(str(n) for n in (*version.release, 999999)))


def load_grid_file(path: Path) -> dict[str, Any]:
    """A TOML grid file: ``torch = [...]``, ``max = [...]`` (items as on the command line), optional ``python``."""
    data = read_toml(path, MAX_GRID_FILE_BYTES)
    grid = checked_table(f"{path}", data.get("grid", data), GRID_FIELDS)
    for key in ("torch", "max"):
        value = grid.get(key)
        if not (isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))):
            raise GpuDoctorError(f"{path}: field {key!r} must be a string or a list of strings")
    if "python" in grid and not isinstance(grid["python"], str):
        raise GpuDoctorError(f"{path}: field 'python' must be a string like 3.11")
    return grid


def cells(torch: Iterable[str], max_versions: Iterable[str], python: str) -> list[Cell]:
    grid = [Cell(t, m, python) for t, m in itertools.product(list(torch), list(max_versions))]
    if len(grid) > MAX_CELLS:
        raise GpuDoctorError(f"the grid has {len(grid)} cells; at most {MAX_CELLS}")
    return grid
