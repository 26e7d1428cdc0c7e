"""Pre-flight checks: found from the inventory alone, before any probe, with real files, folders and variables
where they can exist here, and on recorded environments where they need a GPU driver."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, validate_report

from gpudoctor.facts.stack import device_nodes_fact, library_fact
from gpudoctor.knowledge import load_knowledge, preflight
from gpudoctor.knowledge.registry import REGISTRY
from gpudoctor.model import Driver, Environment
from gpudoctor.report.codec import decode
from gpudoctor.stackfacts import BuildFacts, DeviceNodes, LibraryFact, RuntimeCompiler, StackFacts

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
    # (without PYTHONDONTWRITEBYTECODE, under which the bytecode-less folder would also be a notice: tested below)
    env = {**os.environ, "LD_LIBRARY_PATH": str(libs), "PYTHONDONTWRITEBYTECODE": ""}
    code, document = _doctor_in(tmp_path, env)
    findings = {f["id"]: f for f in document["findings"]}  # type: ignore[union-attr]
    nvcc_cuda = document["environment"]["stack"]["build"]["nvcc_cuda"]  # type: ignore[index]
    also = {"cpp-extension-cuda-mismatch-preflight"} if nvcc_cuda and not nvcc_cuda.startswith("12.") else set()
    assert set(findings) == {"library-on-ld-library-path", "module-shadows-package"} | also  # (the fake torch: 12.8)
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
    environment = decode(json.loads(H100.read_text())).environment
    return dataclasses.replace(environment, **changes)  # type: ignore[arg-type]


def test_torch_built_for_a_newer_cuda_than_the_driver_supports() -> None:
    old_driver = Driver("ok", "535.104.05", "12.2", _h100_environment().driver.gpus)
    finding, floor = preflight(_h100_environment(driver=old_driver, stack=StackFacts(torch_cuda="13.0")))
    assert finding.id == "torch-cuda-newer-than-driver-preflight" and finding.severity == "problem"
    assert floor.id == "driver-below-max-floor-preflight" and floor.severity == "notice"  # MAX 26.7 on 535
    assert finding.title == "torch was built for CUDA 13.0, newer than this driver supports (CUDA 12.2)"
    assert preflight(_h100_environment(stack=StackFacts(torch_cuda="13.0"))) == ()  # driver 580: CUDA 13.0
    assert [f.id for f in preflight(_h100_environment(driver=old_driver, stack=StackFacts(torch_cuda="12.1")))] == [
        "driver-below-max-floor-preflight"
    ]


def test_packages_of_different_releases_installed_together() -> None:
    mixed = {"max-core": "26.6.0", "cuda-python": "12.9.0", "cuda-bindings": "13.0.1"}
    packages = {**_h100_environment().packages, **mixed}
    (finding,) = [f for f in preflight(_h100_environment(packages=packages)) if f.id == "package-generations-mixed"]
    assert finding.evidence == ("max 26.7.0 with max-core 26.6.0", "cuda-python 12.9.0 with cuda-bindings 13.0.1")


def test_the_rules_are_valid_data_and_name_real_checks() -> None:
    rules = [(entry.before.id or entry.id, entry.before) for entry in load_knowledge() if entry.before]
    assert {r.check for _, r in rules} == {name for name, c in REGISTRY.items() if c.environment}
    assert len({rule_id for rule_id, _ in rules}) == len(rules)


# The /proc file as the NVIDIA driver writes it (proprietary and open module), and a maps line as the loader
# writes it, for the NVML library the doctor loads; no NVIDIA driver exists here, so these come from files.
PROC_PROPRIETARY = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Wed Feb 26 19:34:07 UTC 2025\n"
    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"
)
PROC_OPEN = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.82.09  Release Build  (dvs-builder@U16-I3-B03-4-3)\n"
)


def test_kernel_module_and_library_versions_are_read_from_the_files_the_driver_writes(tmp_path: Path) -> None:
    from gpudoctor.facts.nvml import kernel_module_version, loaded_library_version

    proc = tmp_path / "version"
    proc.write_text(PROC_PROPRIETARY)
    assert kernel_module_version(str(proc)) == "570.124.06"
    proc.write_text(PROC_OPEN)
    assert kernel_module_version(str(proc)) == "580.82.09"
    assert kernel_module_version(str(tmp_path / "absent")) is None
    library = tmp_path / "libnvidia-ml.so.570.124"
    library.write_bytes(b"\x7fELF")
    (tmp_path / "libnvidia-ml.so.1").symlink_to(library.name)  # as the driver installs it
    maps = tmp_path / "maps"
    maps.write_text(f"7f1c2a000000-7f1c2a100000 r-xp 00000000 08:01 1234  {tmp_path}/libnvidia-ml.so.1\n")
    assert loaded_library_version(str(maps)) == "570.124"
    assert loaded_library_version("/proc/self/maps") is None  # no NVML library on this machine


def test_a_kernel_module_that_does_not_match_the_library_is_a_problem() -> None:
    environment = _h100_environment()
    stack = dataclasses.replace(environment.stack, kernel_module="570.124.06", nvml_library="570.124")
    (finding,) = [f for f in preflight(dataclasses.replace(environment, stack=stack)) if "mismatch" in f.id]
    assert (
        finding.title
        == "The loaded NVIDIA kernel module (570.124.06) and the user-space driver library (570.124) differ"
    )
    failed = dataclasses.replace(environment.driver, status="NVML error: Driver/library version mismatch")
    (finding,) = [f for f in preflight(dataclasses.replace(environment, driver=failed)) if "mismatch" in f.id]
    assert finding.evidence == ("NVML: NVML error: Driver/library version mismatch",)
    same = dataclasses.replace(environment.stack, kernel_module="580.159.04", nvml_library="580.159.04")
    assert not [f for f in preflight(dataclasses.replace(environment, stack=same)) if "mismatch" in f.id]


def test_driver_below_the_max_floor_and_gpus_outside_the_arch_lists() -> None:
    environment = _h100_environment()
    old = dataclasses.replace(environment.driver, version="570.133.20", cuda_driver_version="12.8")
    packages = {**environment.packages, "max": "26.7.0"}
    found = {f.id: f for f in preflight(dataclasses.replace(environment, driver=old, packages=packages))}
    assert (
        "is reported to need NVIDIA driver 580 or newer; this driver is 570.133.20"
        in found["driver-below-max-floor-preflight"].title
    )
    assert "driver-below-max-floor-preflight" not in {
        f.id for f in preflight(dataclasses.replace(environment, driver=old, packages={**packages, "max": "25.6.0"}))
    }

    # An RTX 5090 (sm_120) under torch 2.6.0+cu124, a GTX 1080 Ti (sm_61) under torch 2.9.1+cu128, an RTX 4090
    # (sm_89) under 2.6.0+cu124 (sm_86 code runs there), an H100 under MAX 26.7 and a Pascal GPU under MAX 26.7.
    def gpus(name: str, capability: str) -> Driver:
        gpu = dataclasses.replace(environment.driver.gpus[0], name=name, compute_capability=capability)
        return dataclasses.replace(environment.driver, gpus=(gpu,))

    def ids(driver: Driver, torch: str, cuda: str, max_version: str | None = None) -> dict[str, str]:
        stack = dataclasses.replace(environment.stack, torch_cuda=cuda)
        packs = {**environment.packages, "torch": torch, "max": max_version}
        return {
            f.id: f.title
            for f in preflight(dataclasses.replace(environment, driver=driver, stack=stack, packages=packs))
        }

    blackwell = ids(gpus("NVIDIA GeForce RTX 5090", "12.0"), "2.6.0+cu124", "12.4")
    assert (
        blackwell["gpu-arch-not-in-torch-build-preflight"]
        == "torch 2.6.0+cu124 has no kernels for the NVIDIA GeForce RTX 5090 (sm_120)"
    )
    assert "gpu-arch-not-in-torch-build-preflight" in ids(gpus("GTX 1080 Ti", "6.1"), "2.9.1+cu128", "12.8")
    assert "gpu-arch-not-in-torch-build-preflight" not in ids(gpus("RTX 4090", "8.9"), "2.6.0+cu124", "12.4")
    assert "gpu-arch-not-in-torch-build-preflight" not in ids(
        gpus("H100", "9.0"), "2.11.0+cu130", "13.0"
    )  # no row: silent
    pascal = ids(gpus("Tesla P100", "6.0"), "2.6.0+cu124", "12.4", "26.7.0")
    assert pascal["gpu-older-than-mojo-toolchain-preflight"].startswith(
        "The Tesla P100 (sm_60) is older than what max 26.7.0"
    )
    assert "gpu-older-than-mojo-toolchain-preflight" not in ids(gpus("H100", "9.0"), "2.6.0+cu124", "12.4", "26.7.0")


def test_packages_installed_without_bytecode_are_a_notice_only_where_python_may_not_write_it(tmp_path: Path) -> None:
    """MAX's Python files copied as `pip install --target --no-compile` leaves them (the GPU machine's layout),
    with PYTHONDONTWRITEBYTECODE set: every process would compile them again. torch here has its bytecode."""
    import importlib.util

    spec = importlib.util.find_spec("max")  # a namespace package: no __init__.py
    assert spec is not None and spec.submodule_search_locations
    source = Path(next(iter(spec.submodule_search_locations)))
    site = tmp_path / "site"
    shutil.copytree(source, site / "max", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    for info in source.parent.glob("max-*.dist-info"):
        shutil.copytree(info, site / info.name)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPYCACHEPREFIX")}
    env.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", GPUDOCTOR_CACHE_DIR=str(tmp_path / "cache"))

    def findings(extra: dict[str, str]) -> dict[str, dict[str, object]]:
        code, document = _doctor_in(tmp_path, {**env, **extra})
        assert code == 0  # a notice, not a problem
        return {f["id"]: f for f in document["findings"]}  # type: ignore[union-attr,index]

    found = findings({})
    assert set(found) == {"bytecode-never-cached"}
    assert found["bytecode-never-cached"]["title"].startswith("Every Python process here compiles max from source")
    evidence = ["PYTHONDONTWRITEBYTECODE=1; no __pycache__ bytecode beside max"]
    assert found["bytecode-never-cached"]["evidence"] == evidence
    assert not list(site.rglob("__pycache__"))  # the doctor wrote nothing there either
    assert findings({"PYTHONPYCACHEPREFIX": str(tmp_path / "mine")}) == {}  # bytecode has a place to go
    assert findings({"PYTHONDONTWRITEBYTECODE": ""}) == {}  # Python writes it beside the sources on first import
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(site)], check=True, env=env)
    assert findings({}) == {}  # compiled once, where the image is built: the fix


def test_declared_requirements_that_installed_packages_do_not_meet_agree_with_pip_check(tmp_path: Path) -> None:
    """A real environment with real wheels installed without their dependencies (rich beside a markdown-it-py older
    than it declares, pygments and attrs absent): the pre-flight finding names the same pairs `pip check` does, from
    metadata read in that interpreter, markers evaluated for it."""
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    python = str(env / "bin" / "python")
    installed = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "rich", "markdown-it-py<2"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    checked = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True, timeout=120, check=False)
    said_by_pip = set()
    for line in checked.stdout.splitlines():
        words = line.split()
        if " requires " in line:  # "rich 15.0.0 requires pygments, which is not installed."
            said_by_pip.add((words[0], words[3].rstrip(",")))
        elif " has requirement " in line:  # "rich 15.0.0 has requirement markdown-it-py>=2.2.0, but you have ..."
            said_by_pip.add((words[0], line.split(", but you have ")[1].split()[0]))
    assert ("rich", "markdown-it-py") in said_by_pip and len(said_by_pip) >= 3

    completed = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "--python", python, "--json", "--no-probes"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    document = json.loads(completed.stdout)
    validate_report(document)
    unmet = document["environment"]["stack"]["requirements_unmet"]
    assert {(u["package"], u["needs"]) for u in unmet} == said_by_pip
    (finding,) = [f for f in document["findings"] if f["id"] == "requirement-not-met-preflight"]
    assert finding["severity"] == "problem" and completed.returncode == 1
    assert any(e.startswith("rich ") and ", but markdown-it-py 1." in e for e in finding["evidence"])
    # the doctor's own environment is consistent: nothing to report there
    own = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "--json", "--no-probes"], capture_output=True, text=True, timeout=120
    )
    assert json.loads(own.stdout)["environment"]["stack"]["requirements_unmet"] == []


def test_device_nodes_are_read_from_dev_and_a_missing_nvidia_uvm_explains_cuda_unknown_error(tmp_path: Path) -> None:
    """The nodes read from a real folder (this machine's /dev has none: no driver, no finding); on the recorded H100
    environment, NVML answering without /dev/nvidia-uvm is the pre-flight problem that explains CUDA's 999."""
    from gpudoctor.facts.nvml import device_nodes

    for name in ("nvidiactl", "nvidia0", "nvidia-modeset", "null"):
        (tmp_path / name).write_text("")
    assert device_nodes(tmp_path) == {"present": ["nvidia-modeset", "nvidia0", "nvidiactl"], "inaccessible": []}
    assert device_nodes(tmp_path / "absent") == {"present": [], "inaccessible": []}

    h100 = decode(json.loads(H100.read_text())).environment
    without_uvm = dataclasses.replace(
        h100, stack=dataclasses.replace(h100.stack, device_nodes=device_nodes_fact(device_nodes(tmp_path)))
    )
    (finding,) = [f for f in preflight(without_uvm) if f.id == "device-nodes-missing-preflight"]
    assert finding.evidence == ("/dev/nvidia-uvm is missing",) and finding.severity == "problem"
    (tmp_path / "nvidia-uvm").write_text("")
    complete = dataclasses.replace(
        h100, stack=dataclasses.replace(h100.stack, device_nodes=device_nodes_fact(device_nodes(tmp_path)))
    )
    assert "device-nodes-missing-preflight" not in {f.id for f in preflight(complete)}
    closed = dataclasses.replace(
        h100,
        stack=dataclasses.replace(
            h100.stack,
            device_nodes=DeviceNodes(present=("nvidia-uvm", "nvidia0", "nvidiactl"), inaccessible=("nvidia0",)),
        ),
    )  # fmt: skip  (root opens everything here, so a closed node is given as data)
    (finding,) = [f for f in preflight(closed) if f.id == "device-nodes-missing-preflight"]
    assert finding.evidence == ("/dev/nvidia0 cannot be opened by this user",)
    assert "device-nodes-missing-preflight" not in {f.id for f in preflight(dataclasses.replace(
        without_uvm, driver=Driver(status="no NVIDIA driver")))}  # fmt: skip


def test_cuda_libraries_are_resolved_as_the_loader_would_and_a_package_missing_its_library_is_named(
    tmp_path: Path,
) -> None:
    """Real files: pip's real nvidia-cuda-runtime-cu12 wheel in a fresh environment, a folder on LD_LIBRARY_PATH
    with another libcudart.so.12 (a symlink to a versioned file, as toolkits lay it out), and this machine's real
    ld.so cache. The loader's pick (LD_LIBRARY_PATH first), the file it really opens, pip's copy and whether they
    are one file; then CuPy for CUDA 12 without any libnvrtc.so.12 is a pre-flight problem naming it."""
    from gpudoctor.facts.libraries import ld_cache, library_facts

    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=300)
    site = next((env / "lib").glob("python3*/site-packages"))
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), "nvidia-cuda-runtime-cu12"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    pip_copy = site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12"
    assert pip_copy.is_file()
    toolkit = tmp_path / "toolkit" / "lib64"
    toolkit.mkdir(parents=True)
    shutil.copy(pip_copy, toolkit / "libcudart.so.12.9.79")
    (toolkit / "libcudart.so.12").symlink_to("libcudart.so.12.9.79")

    facts = library_facts([str(site)], environ={"LD_LIBRARY_PATH": str(toolkit)}, cache={})
    assert facts["libcudart.so.12"] == {
        "loader": str(toolkit / "libcudart.so.12"), "via": "LD_LIBRARY_PATH", "file": "libcudart.so.12.9.79",
        "pip": str(pip_copy), "same_file": False,
    }  # fmt: skip
    alone = library_facts([str(site)], environ={}, cache={})["libcudart.so.12"]
    assert alone["loader"] is None and alone["pip"] == str(pip_copy)
    cache = ld_cache()  # this machine's real cache: whatever it lists is found through it, unless LD_LIBRARY_PATH
    for name, fact in library_facts([], environ={}, cache=cache).items():
        assert fact["via"] in ("ld.so cache", "default folder") and (fact["via"] != "ld.so cache" or name in cache)

    h100 = decode(json.loads(H100.read_text())).environment
    with_cupy = dataclasses.replace(
        h100,
        packages={**h100.packages, "cupy-cuda12x": "13.6.0"},
        stack=dataclasses.replace(
            h100.stack,
            libraries={
                name: library_fact(fact) for name, fact in library_facts([str(site)], environ={}, cache={}).items()
            },
        ),
    )
    (finding,) = [f for f in preflight(with_cupy) if f.id == "library-for-package-not-found-preflight"]
    assert finding.evidence == (
        "cupy-cuda12x 13.6.0 needs libnvrtc.so.12: the loader does not find it and no pip wheel has it",
    )
    assert "libnvrtc.so.12" in finding.title
    fixed = dataclasses.replace(
        with_cupy,
        stack=dataclasses.replace(with_cupy.stack, libraries={"libnvrtc.so.12": LibraryFact(pip="/x/libnvrtc.so.12")}),
    )
    assert "library-for-package-not-found-preflight" not in {f.id for f in preflight(fixed)}


def test_extension_build_facts_are_read_from_the_real_toolkit_and_torch_and_judged(tmp_path: Path) -> None:
    """The CUDA toolkit found as torch.utils.cpp_extension finds it (this machine's real nvcc, when it has one),
    its release and the newest gcc its host_config.h accepts, the real gcc, and the arch names the installed torch's
    cpp_extension.py lists; then the checks: nvcc's CUDA against torch's, gcc against the toolkit, the arch list."""
    import importlib.util

    from gpudoctor.facts.buildtools import build_facts, find_cuda_home, torch_arch_names

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None
    torch_folder = str(Path(spec.origin).parent)
    names = torch_arch_names(torch_folder)
    assert names is not None and "9.0+PTX" in names and "Hopper" in names and "13.5" not in names
    assert find_cuda_home({"CUDA_HOME": "/opt/cuda-x", "PATH": ""}) == "/opt/cuda-x"
    empty = build_facts({"CUDA_HOME": str(tmp_path), "PATH": "/nonexistent"}, torch_folder, None)
    assert empty["nvcc"] is None and empty["nvcc_cuda"] is None and empty["host_compiler"] is None

    real = build_facts(dict(os.environ), torch_folder, None)
    if real["nvcc"] is None:  # a machine without a CUDA toolkit: what it finds is nothing, as torch would
        assert real["nvcc_cuda"] is None
    else:
        said = subprocess.run([real["nvcc"], "--version"], capture_output=True, text=True, check=True).stdout
        assert f"release {real['nvcc_cuda']}," in said
        assert isinstance(real["newest_host_gcc"], int) and real["newest_host_gcc"] >= 11
    gcc = shutil.which("gcc")
    if gcc is not None:
        version = subprocess.run([gcc, "-dumpversion"], capture_output=True, text=True, check=True).stdout
        assert real["host_compiler"] == "gcc" and real["host_compiler_major"] == int(version.split(".")[0])

    recorded = decode(json.loads(H100.read_text())).environment  # torch 2.11.0+cu130 (recorded before
    stack = dataclasses.replace(recorded.stack, torch_cuda="13.0")  # stack facts had torch_cuda)
    h100 = dataclasses.replace(recorded, stack=stack)
    build = BuildFacts(nvcc="/usr/local/cuda/bin/nvcc", cuda_home="/usr/local/cuda", nvcc_cuda="13.0",
                       host_compiler="gcc", host_compiler_major=12, newest_host_gcc=15, ninja=True,
                       setuptools=True, arch_names=tuple(names))  # fmt: skip

    def ids(stack: dict[str, object], env_vars: dict[str, str] | None = None) -> set[str]:
        facts = dataclasses.replace(h100.stack, **stack)  # type: ignore[arg-type]
        environment = dataclasses.replace(h100, stack=facts, env_vars=env_vars or {})
        return {f.id for f in preflight(environment)}

    assert not ids({"build": build}) & {
        "cpp-extension-cuda-mismatch-preflight", "host-compiler-unsupported-preflight",
        "cuda-arch-list-invalid-preflight", "extension-build-tools-missing-preflight",
    }  # fmt: skip
    assert "cpp-extension-cuda-mismatch-preflight" in ids({"build": build, "torch_cuda": "12.4"})
    assert "host-compiler-unsupported-preflight" in ids({"build": dataclasses.replace(build, host_compiler_major=16)})
    assert "cuda-arch-list-invalid-preflight" in ids({"build": build}, {"TORCH_CUDA_ARCH_LIST": "8.6;13.5"})
    assert "cuda-arch-list-invalid-preflight" not in ids({"build": build}, {"TORCH_CUDA_ARCH_LIST": "8.6 Hopper"})
    bare = dataclasses.replace(build, nvcc=None, ninja=False, setuptools=False)
    missing = [f for f in preflight(dataclasses.replace(h100, stack=dataclasses.replace(h100.stack, build=bare)))
               if f.id == "extension-build-tools-missing-preflight"]  # fmt: skip
    assert missing and len(missing[0].evidence) == 3


def test_tritons_ptxas_is_read_from_its_wheel_layout_and_judged_against_each_gpu_and_the_driver(tmp_path: Path) -> None:
    """The ptxas in Triton's wheel layout (this machine's real CUDA toolkit ptxas, linked where the wheel keeps its
    own, when the machine has one) and its release; then the judgement on recorded GPUs and drivers: an RTX 5090
    (sm_120) needs a CUDA 12.8+ ptxas, a Pascal GPU one older than CUDA 13, a driver at least its CUDA major."""
    from gpudoctor.facts.buildtools import triton_ptxas

    site = tmp_path / "site"
    (site / "triton" / "backends" / "nvidia" / "bin").mkdir(parents=True)
    real = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    if os.path.exists(real):
        (site / "triton" / "backends" / "nvidia" / "bin" / "ptxas").symlink_to(real)
        said = subprocess.run([real, "--version"], capture_output=True, text=True, check=True).stdout
        facts = triton_ptxas([str(site)], {})
        assert facts["triton_ptxas"] == str(site / "triton" / "backends" / "nvidia" / "bin" / "ptxas")
        assert facts["triton_ptxas_cuda"] is not None and f"release {facts['triton_ptxas_cuda']}," in said
        assert triton_ptxas([str(site)], {"TRITON_PTXAS_PATH": real})["triton_ptxas"] == real
    assert triton_ptxas([str(tmp_path / "none")], {}) == {}

    h100 = decode(json.loads(H100.read_text())).environment

    def found(cuda: str, capability: str, driver_cuda: str = "13.0", name: str = "GPU") -> tuple[str, ...]:
        driver = dataclasses.replace(
            h100.driver,
            cuda_driver_version=driver_cuda,
            gpus=(dataclasses.replace(h100.driver.gpus[0], name=name, compute_capability=capability),),
        )
        build = BuildFacts(triton_ptxas="/site/triton/backends/nvidia/bin/ptxas", triton_ptxas_cuda=cuda)
        environment = dataclasses.replace(h100, driver=driver, stack=dataclasses.replace(h100.stack, build=build))
        return next((f.evidence for f in preflight(environment) if f.id == "triton-ptxas-vs-gpu-preflight"), ())

    assert found("12.8", "9.0") == () and found("13.0", "12.0") == ()
    assert found("12.4", "12.0", name="NVIDIA GeForce RTX 5090") == (
        "NVIDIA GeForce RTX 5090 (sm_120): Triton's /site/triton/backends/nvidia/bin/ptxas is CUDA 12.4; ptxas "
        "knows sm_120 from CUDA 12.8",
    )
    assert found("13.0", "6.1", name="Tesla P40")[0].endswith("ptxas knows sm_61 up to CUDA 12.9")
    assert found("13.0", "9.0", driver_cuda="12.2") == (
        "Triton's ptxas is CUDA 13.0; the driver supports CUDA 12.2: it cannot load what that ptxas builds",
    )


def test_runtime_compilers_are_found_where_packages_get_them_and_judged_against_the_driver(tmp_path: Path) -> None:
    """NVRTC and NVVM as CuPy, cuda.core and numba-cuda would find them: pip's nvidia-* distributions (their version
    is the CUDA release), the libnvrtc the loader resolves (its real file name), the toolkit at CUDA_HOME (this
    machine's real one flows through the real inventory when there is one). Then the judgement on the recorded H100
    with its driver's CUDA release changed: a newer major is a problem, a newer minor a notice about PTX, and nothing
    is said where no installed package compiles with that compiler."""
    from gpudoctor.facts.runtimecompilers import runtime_compilers

    distributions = [["nvidia-cuda-nvrtc-cu12", "12.8.93", []], ["nvidia-cuda-nvcc-cu12", "12.4.131", []],
                     ["numpy", "2.2.0", []]]  # fmt: skip
    libraries = {
        "libnvrtc.so.12": {"loader": "/usr/local/cuda-12.6/lib64/libnvrtc.so.12", "file": "libnvrtc.so.12.6.77",
                           "same_file": False},
        "libnvrtc.so.13": {"loader": None, "file": None, "pip": "/site/nvidia/cu13/lib/libnvrtc.so.13"},
    }  # fmt: skip
    found = runtime_compilers(distributions, libraries, {"cuda_home": "/usr/local/cuda-13.0", "nvcc_cuda": "13.0"})
    assert found == [
        {"compiler": "NVRTC", "cuda": "12.8", "from": "pip nvidia-cuda-nvrtc-cu12 12.8.93"},
        {"compiler": "NVVM", "cuda": "12.4", "from": "pip nvidia-cuda-nvcc-cu12 12.4.131"},
        {"compiler": "NVRTC", "cuda": "12.6",
         "from": "/usr/local/cuda-12.6/lib64/libnvrtc.so.12 (the loader's libnvrtc.so.12)"},
        {"compiler": "NVVM", "cuda": "13.0", "from": "the CUDA toolkit at /usr/local/cuda-13.0"},
    ]  # fmt: skip
    assert runtime_compilers([], {}, {}) == []

    _, document = _doctor_in(tmp_path, dict(os.environ))
    build = document["environment"]["stack"]["build"]  # type: ignore[index]
    toolkit = [c for c in build["runtime_compilers"] if c["from"].startswith("the CUDA toolkit")]
    if build["nvcc_cuda"]:
        assert toolkit == [{"compiler": "NVVM", "cuda": ".".join(build["nvcc_cuda"].split(".")[:2]),
                            "from": f"the CUDA toolkit at {build['cuda_home']}"}]  # fmt: skip
    else:
        assert toolkit == []

    h100 = decode(json.loads(H100.read_text())).environment

    def said(driver_cuda: str, packages: dict[str, str]) -> dict[str, tuple[str, str]]:
        environment = dataclasses.replace(
            h100,
            driver=dataclasses.replace(h100.driver, cuda_driver_version=driver_cuda),
            packages={**h100.packages, "cuda-core": None, **packages},  # the H100 had cuda.core: counted below
            stack=dataclasses.replace(
                h100.stack,
                build=BuildFacts(
                    runtime_compilers=tuple(RuntimeCompiler(c["compiler"], c["cuda"], c["from"]) for c in found)
                ),
            ),
        )
        return {f.id: (f.severity, "\n".join(f.evidence)) for f in preflight(environment)
                if f.id.startswith("runtime-compiler")}  # fmt: skip

    assert said("12.2", {}) == {}  # no CuPy, cuda.core or numba-cuda: no one compiles with them
    numba_on_12_2 = said("12.2", {"numba-cuda": "0.19.1"})
    assert set(numba_on_12_2) == {"runtime-compiler-newer-major-than-driver-preflight",
                                  "runtime-compiler-newer-than-driver-preflight"}  # fmt: skip
    severity, evidence = numba_on_12_2["runtime-compiler-newer-major-than-driver-preflight"]
    assert severity == "problem" and "NVVM CUDA 13.0 from the CUDA toolkit" in evidence and "NVRTC" not in evidence
    severity, evidence = numba_on_12_2["runtime-compiler-newer-than-driver-preflight"]
    assert severity == "notice" and "NVVM CUDA 12.4 from pip nvidia-cuda-nvcc-cu12 12.4.131, used by numba-cuda" \
        in evidence and "supports CUDA 12.2" in evidence  # fmt: skip
    cupy_on_12_6 = said("12.6", {"cupy-cuda12x": "13.6.0"})
    assert list(cupy_on_12_6) == ["runtime-compiler-newer-than-driver-preflight"]
    assert cupy_on_12_6["runtime-compiler-newer-than-driver-preflight"][1].startswith(
        "NVRTC CUDA 12.8 from pip nvidia-cuda-nvrtc-cu12 12.8.93, used by cupy-cuda12x 13.6.0"
    )
    assert said("13.0", {"cupy-cuda12x": "13.6.0", "numba-cuda": "0.19.1"}) == {}
    assert (
        "used by cuda-core 1.2.0"
        in said("12.6", {"cuda-core": "1.2.0"})["runtime-compiler-newer-than-driver-preflight"][1]
    )
