"""`gpudoctor bisect --package NAME A..B`: any distribution's releases, listed by uv's own resolver, each cell the
examined environment with every other distribution pinned and the release under test installed over what they
declare — for real, offline, with real uv and a wheelhouse of tiny real wheels: `tinylib` 1.0.0 .. 1.5.0 (1.3.0
renames `helper`), `tinyuser` 1.0.0 (imports `helper`, declares tinylib==1.0.0)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli, tiny_wheel
from packaging.version import Version
from test_field_corpus import H100

from gpudoctor.knowledge import match_findings
from gpudoctor.knowledge.answer import GENERIC_ID
from gpudoctor.model import Device, Outcome, ProbeResult, Report
from gpudoctor.stackfacts import UnmetRequirement
from gpudoctor.sweep.envs import find_uv
from gpudoctor.sweep.pinned import frozen_environment, releases_between

RELEASES = [f"1.{n}.0" for n in range(6)]


def make_wheelhouse(folder: Path) -> Path:
    """tinylib 1.0.0 .. 1.5.0 (1.3.0 renames `helper`), tinyuser (imports it, declares tinylib==1.0.0), tinyother."""
    for version in RELEASES:
        renamed = Version(version) >= Version("1.3.0")
        tiny_wheel(folder, "tinylib", version, code="def helper2():\n    return 2\n" if renamed else
                   "def helper():\n    return 1\n")  # fmt: skip
    tiny_wheel(folder, "tinyuser", "1.0.0", requires=["tinylib==1.0.0"], code="from tinylib import helper\n")
    tiny_wheel(folder, "tinyother", "2.0.0", requires=["tinylib>=1.0"])
    return folder


def make_examined(wheelhouse: Path, env: Path) -> Path:
    """The user's environment: tinyuser 1.0.0 with tinylib 1.5.0, which tinyuser does not declare (installed as pip
    installs what it is told, with a warning: here uv with an override); its interpreter."""
    uv = find_uv()
    subprocess.run([uv, "venv", "--quiet", "--offline", "--python", sys.executable, str(env)], check=True)
    override = env.parent / "override.txt"
    override.write_text("tinylib==1.5.0\n")
    subprocess.run([uv, "pip", "install", "--quiet", "--offline", "--find-links", str(wheelhouse), "--python",
                    str(env / "bin" / "python"), "--overrides", str(override), "tinyuser==1.0.0", "tinyother==2.0.0",
                    "tinylib==1.5.0"], check=True)  # fmt: skip
    return env / "bin" / "python"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))


@pytest.fixture(scope="module")
def examined(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_examined(wheelhouse, tmp_path_factory.mktemp("examined") / "env")


def _bisect(wheelhouse: Path, python: Path, envs: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("bisect", "--package", "tinylib", "1.0..1.5", "--python", str(python), "--find-links",
                   str(wheelhouse), "--offline", "--envs", str(envs), "--no-debugger", *args, "--", "python", "-c",
                   "import tinyuser; print(tinyuser.helper())", timeout=600)  # fmt: skip


def test_uv_lists_the_releases_of_a_range_and_the_environment_pinned(wheelhouse: Path, examined: Path) -> None:
    found = releases_between("tinylib", Version("1.1"), Version("1.4.0"), python=str(examined),
                             find_links=[wheelhouse], offline=True)  # fmt: skip
    assert found == ["1.1.0", "1.2.0", "1.3.0", "1.4.0"]
    assert frozen_environment(str(examined), leave_out="tinylib") == ("tinyother==2.0.0", "tinyuser==1.0.0")


def test_a_package_bisect_finds_the_release_and_the_declaration_it_breaks(
    wheelhouse: Path, examined: Path, tmp_path: Path
) -> None:
    completed = _bisect(wheelhouse, examined, tmp_path / "envs", "--json")
    assert completed.returncode == 1, completed.stderr[-3000:]
    report: dict[str, Any] = json.loads(completed.stdout)
    assert report["package"] == "tinylib" and report["versions"] == RELEASES and report["pinned"] == 2
    cells = {c["release"]: c for c in report["cells"]}
    n = len(RELEASES)
    assert len(cells) <= 1 + 2 * n.bit_length()  # 1 + 2 * ceil(log2(n + 1))
    assert cells["1.5.0"]["verdict"] == "bad" and cells["1.5.0"]["way"]["detail"].startswith("ImportError")
    changes = [(t["before"], t["after"], t["exact"]) for t in report["transitions"]]
    assert changes == [("1.2.0", "1.3.0", True)]
    verdict = report["verdict"]
    assert "it broke 1.2.0 -> 1.3.0: last good 1.2.0, first bad 1.3.0 (fail (ImportError" in verdict[0]
    assert "pin: tinylib==1.2.0" in verdict[1]
    declared = [line for line in verdict if "declares" in line]
    assert declared == [
        "tinyuser 1.0.0 declares tinylib==1.0.0; 1.3.0 breaks it (as do the other failing releases "
        "examined: 1.4.0, 1.5.0); yet it passes on 1.2.0, which breaks it too"
    ]
    assert all("tinyother" not in line for line in verdict)  # what it declares (>=1.0) every release meets
    # a good cell had tinyuser (pinned) and tinylib 1.2.0, which breaks what tinyuser declares, yet passes
    assert cells["1.2.0"]["unmet"] == ["tinyuser 1.0.0 requires tinylib==1.0.0, but tinylib 1.2.0 is installed"]

    text = _bisect(wheelhouse, examined, tmp_path / "envs")
    assert "tinylib releases over the examined environment (its 2 other distributions pinned" in text.stdout
    assert all(line.rstrip().endswith("kept)") for line in text.stdout.splitlines() if "s, kept" in line)
    assert "tinyuser 1.0.0 declares tinylib==1.0.0; 1.3.0 breaks it" in text.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--package", "tinylib", "1.5..1.0"], "runs backwards"),
        (["--package", "tinylib", "1.0-1.5"], "give a range of releases A..B"),
        (["--package", "no-such-dist", "1.0..2.0"], "uv finds no release of no-such-dist"),
        (["--package", "tinylib", "1.0..1.5", "--max", "25.3..26.7"], "not allowed with argument"),
        (["--package", "tinylib", "1.0..1.5", "--python", "3.11"], "not a version"),
        (["--package", "tinylib", "1.0..1.5", "--torch", "2.6.0"], "--torch is for --max"),
    ],
)
def test_package_usage_errors_are_one_line_and_exit_2(wheelhouse: Path, args: list[str], words: str) -> None:
    completed = run_cli("bisect", *args, "--find-links", str(wheelhouse), "--offline", "--", "python", "-c", "0")
    assert completed.returncode == 2, completed.stderr
    assert words in completed.stderr and len(completed.stderr.strip().splitlines()) == 1, completed.stderr
    assert "Traceback" not in completed.stderr and completed.stdout == ""


def _generic_evidence(text: str, packages: dict[str, str], unmet: tuple[UnmetRequirement, ...] = ()) -> str:
    """The generic answer's line for a run that printed ``text``, in the recorded H100 environment with
    ``packages`` installed too and ``unmet`` what the inventory found broken."""
    environment = replace(H100.environment, packages={**H100.environment.packages, **packages},
                          stack=replace(H100.environment.stack, requirements_unmet=unmet))  # fmt: skip
    run = ProbeResult(id="your-program", probe="your-program", device=Device.NONE, outcome=Outcome.FAIL,
                      duration_s=1.0, summary="failed", stderr_tail=text, command="python prog.py")  # fmt: skip
    report = Report(doctor_version="0", created="", environment=environment, results=(run,))
    (generic,) = [f for f in match_findings(report) if f.id == GENERIC_ID]
    return generic.evidence[0]


FRAMES = (
    'Traceback (most recent call last):\n  File "/home/u/prog.py", line 3, in <module>\n    out = fused(x)\n'
    '  File "/venv/lib/python3.12/site-packages/foo_kernels/ops.py", line 9, in fused\n'
)


def test_run_proposes_bisect_package_only_with_a_sign_of_a_release_change() -> None:
    line = _generic_evidence(FRAMES + "ValueError: rank 3 expected\n", {"foo-kernels": "1.3.0"})
    # no sign of a release change: no bisect over a whole version range by default (issues 44 and 46)
    assert "bisect" not in line
    # another installed distribution declares a release this one breaks: from that release to the installed one
    declared = UnmetRequirement("bar", "2.0.0", "foo-kernels==1.1.0", "foo-kernels", "1.3.0")
    line = _generic_evidence(FRAMES + "ValueError: rank 3 expected\n", {"foo-kernels": "1.3.0"}, (declared,))
    assert "foo-kernels 1.3.0" in line and "next: gpudoctor bisect --package foo-kernels 1.1.0..1.3.0 -- " in line
    # frames of two packages: no one package to bisect
    two = FRAMES + '  File "/venv/lib/python3.12/site-packages/other_pkg/x.py", line 1, in f\nValueError: no\n'
    assert "bisect" not in _generic_evidence(two, {"foo-kernels": "1.3.0", "other-pkg": "1.0"})
