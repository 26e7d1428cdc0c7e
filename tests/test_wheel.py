"""gpudoctor built as a wheel and installed in a fresh venv works, probes and kernels included."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import ROOT, validate_report


def test_wheel_in_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = dist.glob("gpudoctor-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "gpudoctor/_data/probes/catalog.toml" in names
    assert "gpudoctor/_data/probes/_harness.py" in names
    assert "gpudoctor/report/schema/report.schema.json" in names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]

    # The installed doctor examines the development interpreter, which has torch: probes come from the wheel.
    completed = subprocess.run(
        [str(venv / "bin" / "gpudoctor"), "--json", "--python", sys.executable, "--only", "torch-env"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    document = json.loads(completed.stdout)
    validate_report(document)
    results = {r["id"]: r for r in document["results"]}
    assert results["torch-env/cpu"]["outcome"] == "pass", results["torch-env/cpu"]
    assert "_data/probes/torch_env.py" in results["torch-env/cpu"]["command"]
    assert completed.returncode == 0
    own = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "gpudoctor", "--json", "--no-probes"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert own.returncode == 0
    assert json.loads(own.stdout)["environment"]["packages"]["torch"] is None
