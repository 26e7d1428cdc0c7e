"""Shared fixtures: the synthetic probe folder and a way to run the real CLI in a real subprocess."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.model import Report

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SYNTHETIC = TESTS / "synthetic_probes"
SCHEMA = ROOT / "src" / "gpudoctor" / "report" / "schema" / "report.schema.json"


@pytest.fixture
def synthetic_dir() -> Path:
    return SYNTHETIC


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m gpudoctor ARGS`` in a fresh process, as a user or CI would run it."""
    return subprocess.run(
        [sys.executable, "-m", "gpudoctor", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def validate_report(document: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(document)


@pytest.fixture(scope="session")
def default_suite() -> tuple[int, dict[str, Any]]:
    """One real run of the full default suite (real torch and MAX on the CPU): exit code and JSON."""
    completed = run_cli("--json", "--jobs", "2")
    assert completed.stdout, completed.stderr[-3000:]
    return completed.returncode, json.loads(completed.stdout)


MARKER_ENV = "GPUDOCTOR_TEST_MARKER"


def processes_with_marker(marker: str) -> list[int]:
    """Every live process (but this one) whose environment carries ``MARKER_ENV=marker``: the probes a test
    started inherit it from the doctor, so this finds any probe, or probe's child, left behind."""
    needle = f"{MARKER_ENV}={marker}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes() + b"\0"
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ and state != "Z":
            found.append(int(entry.name))
    return found


REASON_PATTERN = re.compile(
    r"(?:prerequisite|because) (\S+?),? (failed|crashed|timed out|was skipped|was interrupted|passed)(?=\W|$)"
)


def contradicting_reasons(report: Report) -> list[str]:
    """Every place where a run's skip reason or summary names another run's outcome other than the one the report
    shows for that run: such a reason tells the user something the report contradicts."""
    from gpudoctor.suite.schedule import OUTCOME_VERBS

    shown = {r.id: OUTCOME_VERBS[r.outcome] for r in report.results}
    wrong = []
    for result in report.results:
        for text in (result.skip_reason or "", result.summary):
            for named, said in REASON_PATTERN.findall(text):
                if named not in shown or shown[named] != said:
                    wrong.append(f"{result.id}: {text!r} ({named} {shown.get(named, 'is not in the report')})")
    return wrong


def synthetic_copy(tmp_path: Path, catalog: str) -> Path:
    """The synthetic probes in a folder of their own, with ``catalog`` as their catalog.toml."""
    probes = tmp_path / "probes"
    shutil.copytree(SYNTHETIC, probes)
    (probes / "_use_harness.py").write_text(f"import sys\nsys.path.insert(0, {str(ROOT / 'probes')!r})\n")
    (probes / "catalog.toml").write_text(catalog)
    return probes


def hanging_catalog(tmp_path: Path) -> Path:
    """Synthetic probes: one that passes at once, one that hangs for an hour (timeout 600 s), and one after it."""
    return synthetic_copy(
        tmp_path,
        '[[probe]]\nid = "passes"\nscript = "passes.py"\ntitle = "passes"\nstage = 0\ndevices = ["cpu"]\n'
        'details = ["answer"]\n\n'
        '[[probe]]\nid = "hangs"\nscript = "hangs.py"\ntitle = "hangs"\nstage = 1\ntimeout_s = 600\n\n'
        '[[probe]]\nid = "after-hang"\nscript = "passes.py"\ntitle = "after the hang"\nstage = 2\n'
        'devices = ["cpu"]\nafter = ["hangs"]\n',
    )


def tiny_wheel(folder: Path, name: str, version: str, *, requires: Sequence[str] = (), code: str = "") -> Path:
    """A real (tiny) wheel of distribution ``name``: a module (``code`` after its ``__version__``), METADATA (with
    ``requires`` as Requires-Dist), WHEEL and a RECORD with hashes, as a wheelhouse for offline sweeps and bisects
    holds (real uv installs it)."""
    import base64
    import hashlib
    import zipfile

    module = name.replace("-", "_")
    files = {
        f"{module}/__init__.py": f"__version__ = {version!r}\n{code}",
        f"{module}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {requirement}\n" for requirement in requires),
        f"{module}-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: gpudoctor-tests\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{module}-{version}.dist-info/RECORD,,")
    files[f"{module}-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"
    wheel_path = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel_path, "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
    return wheel_path
