"""Shared fixtures: the synthetic probe folder and a way to run the real CLI in a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SYNTHETIC = TESTS / "synthetic_probes"
SCHEMA = ROOT / "src" / "gpudoctor" / "schema" / "report.schema.json"


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
