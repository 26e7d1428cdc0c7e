"""Pre-flight checks: found from the inventory alone, before any probe, with real files, folders and variables
where they can exist here, and on recorded environments where they need a GPU driver."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, validate_report

from gpudoctor.model import Driver, Environment, Report
from gpudoctor.preflight import CHECKS, load_rules, preflight

H100 = ROOT / "tests" / "fixtures" / "h100-suite-report.json"


def _doctor_in(folder: Path, env: dict[str, str]) -> tuple[int, dict[str, object]]:
    completed = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "--json", "--no-probes"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    document = json.loads(completed.stdout)
    validate_report(document)
    return completed.returncode, document


def test_a_shadowing_module_and_libraries_on_ld_library_path_are_found_before_any_probe(tmp_path: Path) -> None:
    libs = tmp_path / "cuda-12.1" / "lib64"
    libs.mkdir(parents=True)
    (libs / "libnvJitLink.so.12").write_bytes(b"\x7fELF")  # what the loader would find first
    (libs / "unrelated.so").write_bytes(b"\x7fELF")
    (tmp_path / "torch").mkdir()  # a user's folder named torch, with a version.py like torch's
    (tmp_path / "torch" / "__init__.py").write_text("")
    (tmp_path / "torch" / "version.py").write_text("__version__ = '2.9.1'\ncuda: Optional[str] = '12.8'\n")
    env = {**os.environ, "LD_LIBRARY_PATH": str(libs)}
    code, document = _doctor_in(tmp_path, env)
    findings = {f["id"]: f for f in document["findings"]}  # type: ignore[union-attr]
    assert set(findings) == {"library-on-ld-library-path", "module-shadows-package"}
    assert findings["library-on-ld-library-path"]["evidence"] == [f"LD_LIBRARY_PATH holds {libs}/libnvJitLink.so.12"]
    assert findings["module-shadows-package"]["evidence"] == [
        f"import torch resolves to {tmp_path}/torch/__init__.py, outside site-packages"
    ]
    stack = document["environment"]["stack"]  # type: ignore[index]
    assert stack["torch_cuda"] == "12.8"  # read from torch/version.py, never imported
    assert code == 1  # a problem finding: the user's torch folder hides the real one


def test_from_a_clean_folder_nothing_is_found(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    code, document = _doctor_in(tmp_path, env)
    assert code == 0 and document["findings"] == []
    modules = document["environment"]["stack"]["modules"]  # type: ignore[index]
    assert "site-packages" in modules["torch"] and "site-packages" in modules["max"]


def _h100_environment(**changes: object) -> Environment:
    environment = Report.from_dict(json.loads(H100.read_text())).environment
    return dataclasses.replace(environment, **changes)  # type: ignore[arg-type]


def test_torch_built_for_a_newer_cuda_than_the_driver_supports() -> None:
    old_driver = Driver("ok", "535.104.05", "12.2", _h100_environment().driver.gpus)
    (finding,) = preflight(_h100_environment(driver=old_driver, stack={"torch_cuda": "13.0"}))
    assert finding.id == "torch-cuda-newer-than-driver-preflight" and finding.severity == "problem"
    assert finding.title == "torch was built for CUDA 13.0, newer than this driver supports (CUDA 12.2)"
    assert preflight(_h100_environment(stack={"torch_cuda": "13.0"})) == ()  # driver 580: CUDA 13.0
    assert preflight(_h100_environment(driver=old_driver, stack={"torch_cuda": "12.1"})) == ()


def test_packages_of_different_releases_installed_together() -> None:
    mixed = {"max-core": "26.6.0", "cuda-python": "12.9.0", "cuda-bindings": "13.0.1"}
    packages = {**_h100_environment().packages, **mixed}
    (finding,) = [f for f in preflight(_h100_environment(packages=packages)) if f.id == "package-generations-mixed"]
    assert finding.evidence == ("max 26.7.0 with max-core 26.6.0", "cuda-python 12.9.0 with cuda-bindings 13.0.1")


def test_the_rules_are_valid_data_and_name_real_checks() -> None:
    rules = load_rules()
    assert {r.check for r in rules} == set(CHECKS)
    assert len({r.id for r in rules}) == len(rules)
