"""NVML facts. The real library runs here (no driver: LibraryNotFound); a GPU cannot exist on this
machine, so the GPU cases use a stand-in for pynvml that answers with the values recorded on the H100
(../shared/FACTS.md) and raises the real pynvml error classes where NVML would.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import pynvml
import pytest

from gpudoctor.facts.nvml import NO_DRIVER, query_driver


def test_real_nvml_without_driver_says_no_driver() -> None:
    driver = query_driver()
    assert driver.status == NO_DRIVER
    assert driver.version is None and driver.gpus == ()


def _fake_nvml(overrides: dict[str, Callable[..., Any]] | None = None) -> types.ModuleType:
    """pynvml as the H100 machine answered (driver 580.159.04, CUDA 13.0, sm_90, MIG off)."""
    fake = types.ModuleType("pynvml")
    for name in dir(pynvml):
        if name.startswith("NVMLError"):
            setattr(fake, name, getattr(pynvml, name))
    memory = types.SimpleNamespace(total=81559 * 1024 * 1024)
    calls: dict[str, Callable[..., Any]] = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlSystemGetDriverVersion": lambda: "580.159.04",
        "nvmlSystemGetCudaDriverVersion_v2": lambda: 13000,
        "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: ("handle", i),
        "nvmlDeviceGetName": lambda h: b"NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetCudaComputeCapability": lambda h: (9, 0),
        "nvmlDeviceGetMemoryInfo": lambda h: memory,
        "nvmlDeviceGetMigMode": lambda h: [0, 0],
    }
    calls.update(overrides or {})
    for name, call in calls.items():
        setattr(fake, name, call)
    return fake


def _raise(error: type[Exception]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        raise error()

    return call


def test_h100_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "pynvml", _fake_nvml())
    driver = query_driver()
    assert driver.status == "ok"
    assert driver.version == "580.159.04"
    assert driver.cuda_driver_version == "13.0"
    (gpu,) = driver.gpus
    assert (gpu.name, gpu.compute_capability, gpu.memory_total_mib, gpu.mig_mode) == (
        "NVIDIA H100 80GB HBM3",
        "9.0",
        81559,
        False,
    )


def test_calls_that_fail_leave_fields_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_nvml(
        {
            "nvmlDeviceGetMigMode": _raise(pynvml.NVMLError_NotSupported),
            "nvmlDeviceGetMemoryInfo": _raise(pynvml.NVMLError_NoPermission),
            "nvmlSystemGetCudaDriverVersion_v2": _raise(pynvml.NVMLError_FunctionNotFound),
        }
    )
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)
    driver = query_driver()
    assert driver.status == "ok" and driver.cuda_driver_version is None
    (gpu,) = driver.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_total_mib is None and gpu.mig_mode is None


def test_init_failure_other_than_missing_library(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_nvml({"nvmlInit": _raise(pynvml.NVMLError_DriverNotLoaded)})
    monkeypatch.setitem(__import__("sys").modules, "pynvml", fake)
    driver = query_driver()
    assert driver.status.startswith("NVML error: ")
    assert not driver.available


def test_cuda_visible_devices_hides_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor.facts.inventory import collect_environment

    monkeypatch.setitem(__import__("sys").modules, "pynvml", _fake_nvml())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert collect_environment().cuda_device_visible
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert not collect_environment().cuda_device_visible
