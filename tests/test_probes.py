"""The real probe suite on this machine: real torch 2.13 and MAX 26.7 on the CPU, no CUDA device."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, validate_report

from gpudoctor.report.codec import decode, encode
from gpudoctor.suite.catalog import default_probe_dir, load_catalog

PROBES = ROOT / "probes"


def test_cpu_variants_pass_and_cuda_variants_skip_for_want_of_a_device(
    default_suite: tuple[int, dict[str, Any]],
) -> None:
    returncode, document = default_suite
    results = {r["id"]: r for r in document["results"]}
    expected = {spec.run_id(d) for spec in load_catalog(default_probe_dir()) for d in spec.devices}
    assert set(results) == expected
    for run_id, result in results.items():
        if result["device"] == "cuda":
            assert result["outcome"] == "skipped", result
            assert result["skip_reason"] == "no CUDA device (no NVIDIA driver)"
        else:
            assert result["outcome"] == "pass", (run_id, result["summary"], result["stderr_tail"][-2000:])
        assert result["command"], run_id  # every result names the command that reproduces it
    assert results["max-import"]["details"]["bridge_module"] == "max.experimental.torch"
    assert results["custom-op/cpu"]["details"]["kernel_generation"] == "mojo1"
    assert results["custom-op-params/cpu"]["details"]["default_honoured"] is True
    assert returncode == 0


def _run_script(
    script: str, *args: str, prelude: str = "", tmp_path: Path, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """Run a probe script as a user would (optionally after ``prelude``), reading its side channel."""
    channel = tmp_path / "result.jsonl"
    code = (
        f"import runpy, sys\n{prelude}\nsys.argv = {[script, *args]!r}\nrunpy.run_path({script!r}, run_name='__main__')"
    )
    full_env = dict(os.environ, **(env or {}), GPUDOCTOR_RESULT_FILE=str(channel), PYTHONPATH=str(PROBES))
    subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, check=False, timeout=600)
    events = [json.loads(line) for line in channel.read_text().splitlines()]
    result: dict[str, Any] = next(e for e in events if e["event"] == "result")
    return result


def test_max_import_recognises_missing_float8_e8m0fnu(tmp_path: Path) -> None:
    """A torch without float8_e8m0fnu (seed 000 used 2.6) breaks MAX's bridge at import; the probe says so."""
    result = _run_script(
        str(PROBES / "max_import.py"), prelude="import torch\ndel torch.float8_e8m0fnu", tmp_path=tmp_path
    )
    assert result["status"] == "fail"
    assert result["exception_type"] == "_maxsupport.BridgeMissingFloat8"
    assert "has no torch.float8_e8m0fnu" in result["message"]


@pytest.mark.parametrize(
    ("script", "device"), [("custom_op_source.py", ()), ("custom_op_via_graph.py", ("--device", "cpu"))]
)
def test_kernels_no_generation_compiles_is_unsupported_not_a_crash(
    script: str, device: tuple[str, ...], tmp_path: Path
) -> None:
    """Both ways of compiling the control (MAX from the source folder; the cached compiled package)."""
    kernels = tmp_path / "kernels"
    for generation in ("mojo1", "legacy"):
        package = kernels / generation / "control"
        package.mkdir(parents=True)
        (package / "__init__.mojo").write_text("")
        (package / "add_one.mojo").write_text("this is not mojo(\n")
    result = _run_script(
        str(PROBES / script),
        *device,
        *("--kernels", str(kernels)),
        tmp_path=tmp_path,
        env={"GPUDOCTOR_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert result["status"] == "skip"
    reason = result["skip_reason"]
    assert reason.startswith("unsupported by this probe: no control-kernel generation compiles with MAX 26.7")
    assert "mojo1: " in reason and "legacy: " in reason
    assert "control/add_one.mojo:2:1: error: unexpected token" in reason
    assert not list((tmp_path / "cache").rglob("*.mojoc"))  # nothing half-built or failed is kept


_BUILD_CONTROL = """
import json, sys
import _maxsupport

class Ctx:
    details = {}
    def step(self, text): pass
    def detail(self, key, value): self.details[key] = value

ctx = Ctx()
path = _maxsupport.compiled_package(ctx, sys.argv[1])
print(json.dumps({"path": path, "how": ctx.details["control_package"]}))
"""


def _build_control(source: Path, cache: Path, count: int = 1) -> list[dict[str, str]]:
    """Build (or reuse) the compiled control package in ``count`` processes started together."""
    env = dict(os.environ, PYTHONPATH=str(PROBES), GPUDOCTOR_CACHE_DIR=str(cache))
    processes = [
        subprocess.Popen([sys.executable, "-c", _BUILD_CONTROL, str(source)], env=env, stdout=subprocess.PIPE)
        for _ in range(count)
    ]
    outputs = [process.communicate(timeout=300)[0] for process in processes]
    assert all(process.returncode == 0 for process in processes)
    return [json.loads(output) for output in outputs]


def test_compiled_control_package_is_built_once_per_content_and_shared(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    source = tmp_path / "control"
    shutil.copytree(ROOT / "kernels" / "mojo1" / "control", source)
    # Two probes that start together: one builds, the other waits for it (a lock on the cache entry) and
    # loads what it built; neither sees a half-written file.
    first = _build_control(source, cache, count=2)
    hows = sorted(entry["how"] for entry in first)
    assert hows[0].startswith("built in "), hows
    assert hows[1].startswith("reused from the cache"), hows
    assert first[0]["path"] == first[1]["path"] and first[0]["path"].endswith("/control.mojoc")
    again = _build_control(source, cache)
    assert again == [{"path": first[0]["path"], "how": "reused from the cache"}]
    # Any change to the source is a different package: built anew, next to the old one.
    (source / "add_one.mojo").write_text((source / "add_one.mojo").read_text() + "\n# edited\n")
    edited = _build_control(source, cache)
    assert edited[0]["how"].startswith("built in ") and edited[0]["path"] != first[0]["path"]
    files = sorted(p.name for p in cache.rglob("*") if p.is_file())
    assert files == [".lock", ".lock", "control.mojoc", "control.mojoc"]
    assert not list(cache.rglob(".staging-*"))


def test_a_control_package_the_compiler_rejects_is_compiled_once(tmp_path: Path) -> None:
    """Runs started together on a MAX the generation was not written for: the compiler's answer is kept with
    the cache entry, and the next run gets the same answer without compiling again; another folder with the
    same content is compiled anew (the messages name the folder)."""
    cache = tmp_path / "cache"
    source = tmp_path / "control"
    source.mkdir()
    (source / "__init__.mojo").write_text("")
    (source / "add_one.mojo").write_text("this is not mojo(\n")
    env = dict(os.environ, PYTHONPATH=str(PROBES), GPUDOCTOR_CACHE_DIR=str(cache))
    code = _BUILD_CONTROL.replace(
        "path = _maxsupport.compiled_package(ctx, sys.argv[1])",
        "try:\n    _maxsupport.compiled_package(ctx, sys.argv[1])\n"
        "except _maxsupport.PackageCompileError as error:\n"
        "    print(json.dumps({'error': _maxsupport.first_compiler_error(error)}))\n"
        "    sys.exit(0)\n"
        "path = None",
    )

    def attempt(folder: Path, count: int = 1) -> list[dict[str, Any]]:
        processes = [
            subprocess.Popen([sys.executable, "-c", code, str(folder)], env=env, stdout=subprocess.PIPE)
            for _ in range(count)
        ]
        return [json.loads(process.communicate(timeout=300)[0]) for process in processes]

    together = attempt(source, count=2)
    assert [entry["error"] for entry in together] == [together[0]["error"]] * 2
    assert together[0]["error"] == f"{source}/add_one.mojo:2:1: error: unexpected token in expression"
    kept = list(cache.rglob("compile-errors.txt"))
    assert len(kept) == 1 and not list(cache.rglob("*.mojoc")) and not list(cache.rglob(".staging-*"))
    # The next run answers from what was kept (shown by editing it), without running the compiler.
    kept[0].write_text(kept[0].read_text().replace("unexpected token", "kept answer"))
    assert attempt(source)[0]["error"] == f"{source}/add_one.mojo:2:1: error: kept answer in expression"
    # The same content in another folder: compiled anew, its own messages.
    elsewhere = tmp_path / "moved" / "control"
    shutil.copytree(source, elsewhere)
    assert attempt(elsewhere)[0]["error"] == f"{elsewhere}/add_one.mojo:2:1: error: unexpected token in expression"


@pytest.mark.parametrize("fixture", ["h100-suite-report.json", "h100-suite-report-cached.json"])
def test_recorded_h100_suite_is_a_valid_report(fixture: str) -> None:
    """The full suite as it ran on the H100 (recorded real runs: before the compiled control package cache,
    and a warm run with it) is kept as a fixture and stays readable."""
    document = json.loads((ROOT / "tests" / "fixtures" / fixture).read_text())
    validate_report(document)
    report = decode(document)
    # Recorded before findings named the runs they matched: read back, they gain an empty list, nothing else.
    for finding in document["findings"]:
        finding.setdefault("runs", [])
    document["environment"].setdefault("stack", {})  # and an empty stack: it was not collected then
    for result in document["results"]:  # and no step timings, CPU time or peak memory: not measured then
        result.setdefault("steps", [])
        result.setdefault("cpu_s", None)
        result.setdefault("peak_rss_mib", None)
    assert encode(report) == document
    validate_report(encode(report))
    assert report.environment.driver.gpus[0].name == "NVIDIA H100 80GB HBM3"
    cuda = [r for r in report.results if r.device.value == "cuda"]
    assert len(cuda) == 9 and all(r.outcome.value == "pass" for r in cuda)
    for result in report.results:
        # The cached run loaded the compiled control package in exactly the probes that use it.
        cached = result.details.get("control_package")
        if fixture.endswith("-cached.json") and result.probe in ("custom-op-via-graph", "custom-op-params"):
            assert cached == "reused from the cache", result.id
        else:
            assert cached is None, result.id


def test_an_unwritable_cache_is_not_a_finding(tmp_path: Path) -> None:
    """Where the cache cannot be written, MAX compiles the control's source folder and the probe passes."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = _run_script(
        str(PROBES / "custom_op_via_graph.py"),
        *("--device", "cpu"),
        tmp_path=tmp_path,
        env={"GPUDOCTOR_CACHE_DIR": str(blocker / "cache")},
    )
    assert result["status"] == "pass", result
    expected = "not cached (GPUDOCTOR_CACHE_DIR: Not a directory); compiled from source"
    assert result["details"]["control_package"] == expected
    assert result["details"]["kernel_generation"] == "mojo1"


def test_the_adjacent_stacks_recorded_on_the_h100_and_what_the_doctor_made_of_them() -> None:
    """A real run on the H100 machine (torch 2.11.0+cu130 with its Triton 3.6, the machine's CUDA 13.0 toolkit, CuPy
    14.2 and numba-cuda 0.30.4 staged as wheels): cpp_extension builds C++ and CUDA ops, Triton and CuPy kernels
    run; numba-cuda fails at import on NumPy 2.5 (np.row_stack is gone), and the mechanism names it. Pre-flight
    reads Triton's two ptxas (12.8, and 12.9 for Blackwell) and finds nothing wrong for an H100 on driver 580."""
    from gpudoctor.knowledge import load_knowledge, match_findings

    recorded = ROOT / "tests" / "fixtures" / "h100" / "h100-adjacent-stacks.json"
    report = decode(json.loads(recorded.read_text()))
    outcomes = {r.id: r.outcome.value for r in report.results}
    assert outcomes == {
        "torch-env/cpu": "pass", "torch-env/cuda": "pass", "cpp-extension/cpu": "pass", "cpp-extension/cuda": "pass",
        "triton/cuda": "pass", "cupy/cuda": "pass", "numba-cuda/cuda": "fail",
    }  # fmt: skip
    build = report.environment.stack.build
    assert build is not None
    ptxas = (build.nvcc_cuda, build.triton_ptxas_cuda, build.triton_ptxas_blackwell_cuda)
    assert ptxas == ("13.0", "12.8", "12.9")
    findings = {f.id: f for f in match_findings(report, load_knowledge())}
    assert findings["attribute-missing-numba"].runs == ("numba-cuda/cuda",)
    assert "numpy.row_stack" in findings["attribute-missing-numba"].explanation
    assert not {"triton-ptxas-vs-gpu-preflight", "cpp-extension-cuda-mismatch-preflight"} & set(findings)
