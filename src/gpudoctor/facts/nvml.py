"""The NVIDIA driver and its GPUs through NVML (nvidia-ml-py), without initialising CUDA.

Every NVML call that can fail (NotSupported, NoPermission, MIG, no driver) leaves its field as None.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from gpudoctor.model import Driver, Gpu

T = TypeVar("T")

NO_DRIVER = "no NVIDIA driver"


def _optional(call: Callable[[], T]) -> T | None:
    """Run one NVML query; any NVML error means "this field is not available here"."""
    import pynvml

    try:
        return call()
    except pynvml.NVMLError:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _cuda_version(encoded: int) -> str:
    """NVML encodes CUDA versions as 1000 * major + 10 * minor (13000 -> "13.0")."""
    return f"{encoded // 1000}.{(encoded % 1000) // 10}"


def _gpu(pynvml: Any, index: int) -> Gpu:
    handle = _optional(lambda: pynvml.nvmlDeviceGetHandleByIndex(index))
    if handle is None:
        return Gpu(index=index)
    name = _optional(lambda: _text(pynvml.nvmlDeviceGetName(handle)))
    cc = _optional(lambda: pynvml.nvmlDeviceGetCudaComputeCapability(handle))
    memory = _optional(lambda: pynvml.nvmlDeviceGetMemoryInfo(handle))
    mig = _optional(lambda: pynvml.nvmlDeviceGetMigMode(handle))
    return Gpu(
        index=index,
        name=name,
        compute_capability=None if cc is None else f"{cc[0]}.{cc[1]}",
        memory_total_mib=None if memory is None else int(memory.total) // (1024 * 1024),
        mig_mode=None if mig is None else bool(mig[0]),
    )


_KERNEL_MODULE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)")
_NVML_LIBRARY = re.compile(r"libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$")


def kernel_module_version(path: str = "/proc/driver/nvidia/version") -> str | None:
    """The loaded NVIDIA kernel module's version, from its /proc file; None without one."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(4096)
    except OSError:
        return None
    found = _KERNEL_MODULE.search(text)
    return found.group(1) if found else None


def loaded_library_version(maps: str = "/proc/self/maps") -> str | None:
    """The version of the user-space NVML library this process loaded (libnvidia-ml.so.<version>, the file
    the .so.1 link points at); None when it is not loaded or not named by version."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as handle:
            paths = {line.split()[-1] for line in handle if "libnvidia-ml.so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        found = _NVML_LIBRARY.search(os.path.basename(os.path.realpath(path)))
        if found:
            return found.group(1)
    return None


def device_nodes(root: Path = Path("/dev")) -> dict[str, list[str]]:
    """The NVIDIA device nodes in ``root`` (nvidiactl, nvidia-uvm, nvidia0, ...) and those this user cannot open for
    reading and writing. CUDA needs nvidiactl, a node per GPU and nvidia-uvm; NVML (nvidia-smi) does without
    nvidia-uvm, so a machine whose NVML answers can still fail cuInit with "unknown error" (999)."""
    try:
        names = sorted(n for n in os.listdir(root) if n.startswith("nvidia"))
    except OSError:
        names = []
    inaccessible = [n for n in names if not os.access(root / n, os.R_OK | os.W_OK)]
    return {"present": names, "inaccessible": inaccessible}


def query_driver() -> Driver:
    """What NVML says about the driver; never raises."""
    try:
        import pynvml
    except ImportError:
        return Driver(status="nvidia-ml-py is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        return Driver(status=NO_DRIVER)
    except pynvml.NVMLError as error:
        return Driver(status=f"NVML error: {error}")
    try:
        version = _optional(lambda: _text(pynvml.nvmlSystemGetDriverVersion()))
        cuda = _optional(pynvml.nvmlSystemGetCudaDriverVersion_v2)
        count = _optional(pynvml.nvmlDeviceGetCount) or 0
        gpus = tuple(_gpu(pynvml, i) for i in range(count))
    finally:
        _optional(pynvml.nvmlShutdown)
    return Driver(
        status="ok",
        version=version,
        cuda_driver_version=None if cuda is None else _cuda_version(int(cuda)),
        gpus=gpus,
    )


def process_gpu_view(pids: set[int]) -> dict[str, Any] | None:
    """What NVML sees of a running program (a hang, at its deadline): each GPU's utilisation and the GPU memory the
    program's processes hold there. None without a driver; never raises."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        gpus = []
        for index in range(_optional(pynvml.nvmlDeviceGetCount) or 0):
            handle: Any = _optional(partial(pynvml.nvmlDeviceGetHandleByIndex, index))
            if handle is None:
                continue
            rates: Any = _optional(partial(pynvml.nvmlDeviceGetUtilizationRates, handle))
            running: Any = _optional(partial(pynvml.nvmlDeviceGetComputeRunningProcesses, handle)) or []
            held = [int(p.usedGpuMemory or 0) // (1024 * 1024) for p in running if int(p.pid) in pids]
            gpus.append({"gpu": index, "utilisation_percent": None if rates is None else int(rates.gpu),
                         "program_memory_mib": sum(held) if held else None})  # fmt: skip
        return {"gpus": gpus}
    finally:
        _optional(pynvml.nvmlShutdown)


def _command_line(pid: int) -> str | None:
    """A process's command line from /proc (arguments joined by spaces); None when it is gone or not readable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read(64 * 1024).rstrip(b"\0").split(b"\0")
    except OSError:
        return None
    text = " ".join(a.decode(errors="replace") for a in argv)
    return text or None


def gpu_processes() -> list[dict[str, Any]] | None:
    """Every compute process on every GPU, as NVML lists them (nvmlDeviceGetComputeRunningProcesses):

        [{"gpu": 0, "pid": 1234, "used_memory_mib": 812, "command": "python train.py"}, ...]

    ``gpu`` is NVML's index, ``used_memory_mib`` None where NVML does not say (MIG, no permission), ``command`` the
    process's command line read from /proc, None where it cannot be read (another container's pid, a process that
    has ended). A GPU whose handle or list cannot be read contributes nothing. None without a driver; never
    raises. Plain data, so that any part of gpudoctor (a hang's deadline, an out-of-memory diagnosis) can keep it."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        found: list[dict[str, Any]] = []
        for index in range(_optional(pynvml.nvmlDeviceGetCount) or 0):
            handle: Any = _optional(partial(pynvml.nvmlDeviceGetHandleByIndex, index))
            running: Any = [] if handle is None else _optional(
                partial(pynvml.nvmlDeviceGetComputeRunningProcesses, handle))  # fmt: skip
            for process in running or ():
                used = getattr(process, "usedGpuMemory", None)
                found.append({"gpu": index, "pid": int(process.pid),
                              "used_memory_mib": None if used is None else int(used) // (1024 * 1024),
                              "command": _command_line(int(process.pid))})  # fmt: skip
        return found
    except Exception:  # an NVML binding that answers in an unexpected shape: nothing known, never a crash
        return None
    finally:
        _optional(pynvml.nvmlShutdown)
