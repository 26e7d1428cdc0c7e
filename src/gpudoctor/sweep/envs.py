"""Environments for sweep cells, built with uv: one virtual environment per cell, its packages hardlinked
from uv's shared cache, so a second cell costs seconds and megabytes, not gigabytes.

This module and `pinned` (which asks uv for releases and an environment) are the only ones that run uv; they come with
the ``sweep`` extra (``pip install "gpudoctor[sweep]"``).
Where uv finds packages (indexes, find-links) is the user's uv configuration; gpudoctor adds only the wheelhouses
and --offline a command names (``--find-links DIR --offline``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudoctor.atomic import atomic_write
from gpudoctor.errors import GpuDoctorError
from gpudoctor.facts.interpreter import site_packages
from gpudoctor.facts.inventory import package_versions
from gpudoctor.process.cancel import CancelScope
from gpudoctor.process.supervise import supervise
from gpudoctor.suite.bytecode import cache_dir
from gpudoctor.sweep.grid import Cell
from gpudoctor.textfile import read_text

STAMP = "gpudoctor-cell.json"
INHERIT_PTH = "_gpudoctor_inherit.pth"
_BUILD_TIMEOUT_S = 1800.0
_REASON_LINES = 12


def find_uv() -> str:
    """The uv executable: the one the ``uv`` package ships, else one on PATH; a clear error without either."""
    try:
        import uv  # the sweep extra

        return str(uv.find_uv_bin())
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
        if found:
            return found
    raise GpuDoctorError(
        "gpudoctor sweep builds its environments with uv, which is not installed",
        hint='pip install "gpudoctor[sweep]"',
    )


@dataclass(frozen=True)
class Built:
    """A cell's environment, ready: its interpreter and the versions really installed."""

    python: Path
    installed: Mapping[str, str | None]
    seconds: float
    reused: bool


@dataclass(frozen=True)
class NotBuilt:
    """A cell whose environment could not be built: unresolvable (the resolver's reason) or another failure."""

    unresolvable: bool
    reason: str
    seconds: float


def run_uv(
    argv: Sequence[str], cancel: CancelScope, timeout_s: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a uv command in its own process group, owned by ``cancel`` (cancelling kills it at once, and raises
    Cancelled: the sweep was stopped while a build ran)."""
    ran = supervise(argv, cancel, timeout_s, env=env).unless_cancelled()
    stdout, stderr = ran.stdout.data.decode("utf-8", "replace"), ran.stderr.text()
    if ran.timed_out:
        return subprocess.CompletedProcess(list(argv), -9, stdout, stderr + f"\n(killed after {timeout_s:g} s)")
    return subprocess.CompletedProcess(list(argv), ran.returncode, stdout, stderr)


_PATHS_SNIPPET = (
    "import json, sysconfig; print(json.dumps(sorted({sysconfig.get_path('purelib'), sysconfig.get_path('platlib')})))"
)


def installed_versions(python: Path | str, names: Sequence[str]) -> dict[str, str | None]:
    """The versions really installed in a cell (all None when its interpreter cannot tell)."""
    try:
        return package_versions(str(python), names)
    except GpuDoctorError:
        return dict.fromkeys(names)


def _satisfies(installed: str | None, wanted: str) -> bool:
    """Whether ``installed`` meets ``==wanted`` as pip reads it: 2.13.0+cpu meets ==2.13.0 (a local label matches
    a requirement without one)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if installed is None:
        return False
    try:
        return SpecifierSet(f"=={wanted}").contains(Version(installed), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return installed == wanted


def _env_python(env: Path) -> Path:
    return env / "bin" / "python"


def _reason(text: str) -> str:
    """The resolver's explanation, without progress noise: its first lines."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip() and not line.startswith(("Resolved", "Using"))]
    return "\n".join(lines[:_REASON_LINES])


class EnvironmentBuilder:
    """Builds (or reuses) one uv environment per cell under ``root``.

    ``inherit``: an interpreter whose installed packages the cells may use (a .pth file puts its
    site-packages after the cell's own); a requirement it already satisfies at exactly the wanted version
    is not installed again. This is how a test reuses the torch it already has.
    """

    def __init__(
        self,
        root: Path,
        *,
        inherit: str | None = None,
        uv: str | None = None,
        find_links: Sequence[Path] = (),
        offline: bool = False,
    ) -> None:
        self.root = root
        self.uv = uv or find_uv()
        self.inherit = inherit
        # wheelhouses (a GPU cluster cut off from the internet): passed to uv, and with offline, all there is
        self.sources = [arg for folder in find_links for arg in ("--find-links", str(folder))]
        self.sources += ["--offline"] if offline else []
        self._inherited: dict[str, str | None] | None = None
        self._inherited_paths: list[str] | None = None

    def path(self, cell: Cell) -> Path:
        return self.root / cell.key

    def _inherited_versions(self, names: Sequence[str]) -> dict[str, str | None]:
        if self.inherit is None:
            return dict.fromkeys(names)
        if self._inherited is None:
            self._inherited = installed_versions(self.inherit, ["torch", "max", "numpy", "cffi"])
        return {name: self._inherited.get(name) for name in names}

    def _stamp(self, cell: Cell) -> dict[str, object]:
        return {"cell": cell.to_dict(), "inherit": self.inherit}  # where wheels came from does not change a cell

    def build(self, cell: Cell, cancel: CancelScope, extra: Sequence[str] = ("numpy", "cffi")) -> Built | NotBuilt:
        """The cell's environment: reused when an earlier build of the same cell completed, else built."""
        started = time.monotonic()
        env = self.path(cell)
        stamp = env / STAMP
        if stamp.is_file() and _env_python(env).is_file():
            try:
                recorded = json.loads(read_text(stamp, 1024 * 1024))
            except (GpuDoctorError, ValueError):
                recorded = None
            if isinstance(recorded, dict) and recorded.get("request") == self._stamp(cell):
                return Built(_env_python(env), recorded.get("installed", {}), time.monotonic() - started, True)
        if env.exists():
            shutil.rmtree(env)  # an earlier build that did not complete, or another request
        self.root.mkdir(parents=True, exist_ok=True)
        uv_env = {**os.environ, "VIRTUAL_ENV": "", "UV_NO_PROGRESS": "1"}
        created = run_uv(
            [
                self.uv,
                "venv",
                "--quiet",
                *(["--offline"] if "--offline" in self.sources else []),
                "--python",
                cell.python,
                str(env),
            ],
            cancel,
            _BUILD_TIMEOUT_S,
            uv_env,
        )
        if created.returncode != 0:
            return NotBuilt(False, "uv venv: " + _reason(created.stderr), time.monotonic() - started)
        wanted = cell.requirements()
        inherited = self._inherited_versions(list(wanted))
        if self.inherit is not None:
            self._write_inherit_pth(env)
        requirements = [f"{name}=={version}" for name, version in wanted.items()
                        if not _satisfies(inherited.get(name), version)]  # fmt: skip
        requirements += [name for name in extra if self.inherit is None and not cell.package]
        if cell.package:  # the release under test over the pinned environment, each line also an override
            listed = env / "gpudoctor-requirements.txt"
            atomic_write(listed, "\n".join(cell.overrides()) + "\n")
            requirements = ["-r", str(listed), "--overrides", str(listed)]
        if requirements:
            installed = run_uv(
                [self.uv, "pip", "install", "--quiet", *self.sources, "--python", str(_env_python(env)), *requirements],
                cancel,
                _BUILD_TIMEOUT_S,
                uv_env,
            )
            if installed.returncode != 0:
                text = installed.stderr + installed.stdout
                unresolvable = "No solution found" in text or "unsatisfiable" in text
                return NotBuilt(unresolvable, _reason(text), time.monotonic() - started)
        versions = installed_versions(_env_python(env), list(wanted))
        atomic_write(stamp, json.dumps({"request": self._stamp(cell), "installed": versions}, indent=2) + "\n")
        return Built(_env_python(env), versions, time.monotonic() - started, False)

    def _write_inherit_pth(self, env: Path) -> None:
        if self._inherited_paths is None:
            assert self.inherit is not None
            completed = subprocess.run(
                [self.inherit, "-c", _PATHS_SNIPPET], capture_output=True, text=True, timeout=60, check=True
            )
            self._inherited_paths = json.loads(completed.stdout)
        site = site_packages(str(_env_python(env)))
        atomic_write(site / INHERIT_PTH, "\n".join(self._inherited_paths) + "\n", mode=0o644)


def default_envs_dir() -> Path:
    """Where sweep environments live: $GPUDOCTOR_CACHE_DIR/envs, else the XDG cache."""
    return cache_dir() / "envs"


def default_python() -> str:
    """The Python the cells run on by default: this interpreter's major.minor."""
    return sysconfig.get_python_version()
