"""What a package bisect's cells are made of, asked of uv: the releases of a distribution between two versions as
uv's own resolver sees the indexes (the user's uv configuration, the wheelhouses and --offline given), and the
examined environment's distributions, pinned.

uv has no `pip index versions`; the releases are walked with its resolver instead: the lowest release in the range,
then the lowest above it, and so on (`uv pip compile --no-deps --resolution lowest`, one short call per release,
answered from uv's cache once the index page is in it). What it lists is what a cell's `uv pip install` can install.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from gpudoctor.errors import GpuDoctorError
from gpudoctor.process.cancel import CancelScope
from gpudoctor.sweep.envs import find_uv, run_uv

MAX_RELEASES = 200  # a range wider than this is not one a bisect needs walked release by release
_UV_TIMEOUT_S = 300.0


def uv_sources(find_links: Sequence[Path], offline: bool) -> list[str]:
    """The arguments that send uv to the wheelhouses (and nowhere else with ``offline``), as a cell's build has them."""
    return [arg for folder in find_links for arg in ("--find-links", str(folder))] + (["--offline"] if offline else [])


def _first_line(text: str) -> str:
    """uv's reason in one line: its "Because ..." sentence where it gives one, else its first line."""
    lines = [
        line.strip(" \u00d7\u2570\u2500\u25b6")
        for line in text.splitlines()
        if line.strip() and not line.startswith("Resolved")
    ]
    because = [line.split(":", 1)[-1].strip() if "Because" in line.split(":", 1)[-1] else line for line in lines]
    chosen = next((line for line in because if line.startswith("Because")), lines[0] if lines else "uv gave no reason")
    return chosen[:300]


def releases_between(
    package: str,
    low: Version,
    high: Version,
    *,
    python: str,
    find_links: Sequence[Path] = (),
    offline: bool = False,
    cancel: CancelScope | None = None,
) -> list[str]:
    """Every release of ``package`` from ``low`` to ``high`` (both included, pre-releases left out as uv leaves them),
    oldest first, as uv resolves for the interpreter ``python``; a GpuDoctorError when uv finds none."""
    uv, scope = find_uv(), cancel if cancel is not None else CancelScope()
    env = {**os.environ, "VIRTUAL_ENV": "", "UV_NO_PROGRESS": "1"}
    name = canonicalize_name(package)
    found: list[str] = []
    floor = f">={low}"
    with tempfile.TemporaryDirectory(prefix="gpudoctor-releases-") as folder:
        wanted = Path(folder) / "wanted.in"
        while len(found) < MAX_RELEASES:
            wanted.write_text(f"{package}{floor},<={high}\n", encoding="utf-8")
            argv = [uv, "pip", "compile", str(wanted), "--no-deps", "--no-header", "--no-annotate", "--quiet",
                    "--resolution", "lowest", "--python", python, *uv_sources(find_links, offline)]  # fmt: skip
            ran = run_uv(argv, scope, _UV_TIMEOUT_S, env)
            release = _pinned_release(ran.stdout, name) if ran.returncode == 0 else None
            if release is None:
                if found and ("No solution found" in ran.stderr or "unsatisfiable" in ran.stderr):
                    break  # the walk went past the last release of the range
                raise GpuDoctorError(
                    f"--package {package} {low}..{high}: uv finds no release of {package} in that range "
                    f"({_first_line(ran.stderr)})",
                    hint="check the name and the range; uv reads your uv configuration, --find-links and --offline",
                )
            found.append(release)
            floor = f">{release}"
    return found


def _pinned_release(output: str, name: str) -> str | None:
    for line in output.splitlines():
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)", line)
        if match and canonicalize_name(match[1]) == name:
            try:
                return str(Version(match[2]))
            except InvalidVersion:
                return match[2]
    return None


def frozen_environment(python: str, *, leave_out: str, cancel: CancelScope | None = None) -> tuple[str, ...]:
    """The distributions installed for ``python`` as requirement lines (``name==version``, or ``name @ url`` where
    it came from one), less ``leave_out`` and editable installs (the user's own project: it runs from its folder)."""
    ran = run_uv([find_uv(), "pip", "freeze", "--exclude-editable", "--python", python],
                 cancel if cancel is not None else CancelScope(), _UV_TIMEOUT_S,
                 {**os.environ, "VIRTUAL_ENV": "", "UV_NO_PROGRESS": "1"})  # fmt: skip
    if ran.returncode != 0:
        raise GpuDoctorError(f"cannot list what is installed for --python: {_first_line(ran.stderr)}")
    pins = []
    for line in ran.stdout.splitlines():
        line = line.strip()
        match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(==|@)", line)
        if match and canonicalize_name(match[1]) != canonicalize_name(leave_out):
            pins.append(line)
    return tuple(sorted(pins, key=str.lower))
