"""Facts about the stack without side effects on it: NVML, package metadata, the platform, env vars.

Package versions describe the interpreter the probes will run in; for another interpreter than the
doctor's own they are read there by a small metadata-only script (it imports neither torch nor MAX).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from gpudoctor.errors import GpuDoctorError
from gpudoctor.facts.beside import Beside
from gpudoctor.facts.installed import installed_versions
from gpudoctor.facts.interpreter import ask, check_cpython
from gpudoctor.facts.nvml import NO_DRIVER, device_nodes, kernel_module_version, loaded_library_version, query_driver
from gpudoctor.facts.stack import build_and_load_facts, device_nodes_fact, interpreter_facts
from gpudoctor.model import Driver, Environment, Platform
from gpudoctor.process.cancel import CancelScope
from gpudoctor.redact import redact_text
from gpudoctor.stackfacts import DeviceNodes

# Distribution names, as pip knows them, whose versions decide whether a custom op works.
PACKAGES: tuple[str, ...] = (
    "torch",
    "max",
    "max-core",
    "max-mojo-libs",
    "mojo-compiler",
    "mojo-compiler-mojo-libs",
    "mojo",
    "cuda-core",
    "cuda-bindings",
    "cuda-python",
    "cffi",
    "numpy",
    "triton",
    "cupy-cuda11x",
    "cupy-cuda12x",
    "cupy-cuda13x",
    "numba-cuda",
    "nvidia-ml-py",
)

# Environment variables that change what CUDA, torch or MAX do.
ENV_VARS: tuple[str, ...] = (
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "MODULAR_HOME",
    "MODULAR_CACHE_DIR",
    "MOJO_PYTHON_LIBRARY",
    "PYTORCH_CUDA_ALLOC_CONF",
    "TORCH_CUDA_ARCH_LIST",
    "TORCHINDUCTOR_CACHE_DIR",
    "MODULAR_DERIVED_PATH",
    "MODULAR_THREAD_BUSY_WAIT_US",
    "MODULAR_MAX_ENABLE_MODEL_IR_CACHE",
    "GPUDOCTOR_CACHE_DIR",
    "XDG_CACHE_HOME",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONPYCACHEPREFIX",
)

# Facts about the examined interpreter's stack that need no import of torch or MAX: where each top-level name
# would be imported from (a file of the user's can shadow a package), the site-packages folders, and the CUDA
# version torch was built for (read from torch/version.py, never imported). Compatible with old Pythons; run
# in the examined interpreter, or exec'd here for the doctor's own.
_STACK_SOURCE = """
def stack_facts():
    import os, re, site, sys
    from importlib.machinery import PathFinder
    search = [os.getcwd()] + [p for p in sys.path if p]
    sites = list(getattr(site, "getsitepackages", lambda: [])())
    if getattr(site, "ENABLE_USER_SITE", False):
        sites.append(site.getusersitepackages())
    first_site = min([search.index(s) for s in sites if s in search] or [len(search)])
    modules, shadowing = {}, []
    for name in ("torch", "max", "mojo", "cuda", "cffi", "numpy"):
        for index, entry in enumerate(search):
            spec = PathFinder.find_spec(name, [entry])
            if spec is None:
                continue
            where = spec.origin if spec.origin not in (None, "namespace") else None
            if where is None and spec.submodule_search_locations:
                where = list(spec.submodule_search_locations)[0]
            modules[name] = where
            # A module no distribution installed (no .dist-info beside it), found before site-packages
            # (the current folder, PYTHONPATH): it hides whatever is installed under that name.
            try:
                installed = any(e.endswith((".dist-info", ".egg-info")) for e in os.listdir(entry))
            except OSError:
                installed = False
            if index < first_site and not installed:
                shadowing.append(name)
            break
        else:
            modules[name] = None
    torch_cuda = None
    torch_at = modules.get("torch")
    if torch_at:
        folder = torch_at if os.path.isdir(torch_at) else os.path.dirname(torch_at)
        try:
            with open(os.path.join(folder, "version.py")) as handle:
                found = re.search(r"^cuda\\s*(?::[^=]*)?=\\s*['\\"]([^'\\"]+)['\\"]", handle.read(), re.M)
            torch_cuda = found.group(1) if found else None
        except (IOError, OSError):
            pass
    # Packages none of whose top-level modules has bytecode beside it: with PYTHONDONTWRITEBYTECODE, or in a folder
    # that cannot be written, every process that imports them compiles them from source again.
    tag = getattr(getattr(sys, "implementation", None), "cache_tag", None)
    no_bytecode = []
    for name in ("torch", "max"):
        origin = modules.get(name)
        if not tag or not origin:
            continue
        folder = origin if os.path.isdir(origin) else os.path.dirname(origin)  # max is a namespace package
        try:
            sources = [n[:-3] for n in os.listdir(folder) if n.endswith(".py")]
            cache = os.path.join(folder, "__pycache__")
            compiled = set(os.listdir(cache)) if os.path.isdir(cache) else set()
        except OSError:
            continue
        if sources and not any("%s.%s.pyc" % (n, tag) in compiled for n in sources):
            no_bytecode.append(name)
    # Every distribution on the path with its declared requirements (Requires-Dist, read from the METADATA headers
    # without importing anything), and the values markers are evaluated with: the doctor checks them (pip check).
    distributions = {}
    for entry in search:
        try:
            names = [n for n in os.listdir(entry) if n.endswith(".dist-info")]
        except OSError:
            continue
        for folder in names:
            name, version, requires = None, None, []
            try:
                with open(os.path.join(entry, folder, "METADATA"), encoding="utf-8", errors="replace") as handle:
                    for line in handle:
                        if not line.strip():
                            break
                        key, _, value = line.partition(":")
                        if key == "Name":
                            name = value.strip()
                        elif key == "Version":
                            version = value.strip()
                        elif key == "Requires-Dist":
                            requires.append(value.strip())
            except (IOError, OSError):
                continue
            if name and version and name.lower() not in distributions:  # the first on the path is the one imported
                distributions[name.lower()] = [name, version, requires]
    import platform as _platform
    markers = {
        "implementation_name": sys.implementation.name,
        "implementation_version": "%d.%d.%d" % tuple(sys.implementation.version[:3]),
        "os_name": os.name,
        "platform_machine": _platform.machine(),
        "platform_release": _platform.release(),
        "platform_system": _platform.system(),
        "platform_version": _platform.version(),
        "python_full_version": _platform.python_version(),
        "platform_python_implementation": _platform.python_implementation(),
        "python_version": "%d.%d" % sys.version_info[:2],
        "sys_platform": sys.platform,
    }
    return {"modules": modules, "shadowing": shadowing, "site_packages": sites, "torch_cuda": torch_cuda,
            "no_bytecode": no_bytecode, "distributions": list(distributions.values()), "markers": markers}
"""

# Runs inside the examined interpreter: metadata only, compatible with old Pythons, prints one JSON line.
_REMOTE_SNIPPET = (
    _STACK_SOURCE
    + """
import json, platform, sys
try:
    from importlib import metadata
except ImportError:
    metadata = None
names = json.loads(sys.argv[1])
versions = {}
for name in names:
    try:
        versions[name] = metadata.version(name) if metadata else None
    except Exception:
        versions[name] = None
print(json.dumps({
    "python": platform.python_version(),
    "implementation": platform.python_implementation(),
    "prefix": sys.prefix,
    "packages": versions,
    "stack": stack_facts(),
}))
"""
)


def _local_stack_facts() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(_STACK_SOURCE, "<gpudoctor stack facts>", "exec"), namespace)
    facts: dict[str, Any] = namespace["stack_facts"]()
    return facts


def _local_packages(names: tuple[str, ...]) -> dict[str, str | None]:
    return installed_versions(names)  # importlib.metadata's answers, in one pass over sys.path


def _remote_facts(python: str, names: tuple[str, ...], cancel: CancelScope | None = None) -> dict[str, Any]:
    """Python version and package versions as the interpreter at ``python`` sees them (a CPython 3, or a
    usage error saying what it is instead)."""
    facts = ask(python, _REMOTE_SNIPPET, json.dumps(names), cancel=cancel)
    check_cpython(python, facts)
    if not isinstance(facts.get("packages"), dict):
        raise GpuDoctorError(f"--python {redact_text(python)}: its answer lacks the package versions")
    return facts


def package_versions(python: str, names: Sequence[str]) -> dict[str, str | None]:
    """Versions of ``names`` as the interpreter at ``python`` sees them (metadata only; None: not installed)."""
    if is_own_interpreter(python):
        return _local_packages(tuple(names))
    raw = _remote_facts(python, tuple(names))["packages"]
    assert isinstance(raw, dict)
    return {str(k): (None if v is None else str(v)) for k, v in raw.items()}


def _os_release() -> str | None:
    try:
        info = platform.freedesktop_os_release()
    except OSError:
        return None
    return info.get("PRETTY_NAME") or info.get("NAME")


def _libc() -> str | None:
    name, version = platform.libc_ver()
    return f"{name} {version}" if name else None


def is_own_interpreter(python: str) -> bool:
    try:
        return (
            Path(python).resolve() == Path(sys.executable).resolve()
            and Path(python).parent == Path(sys.executable).parent
        )
    except OSError:
        return False


def find_mojo_cli(python: str) -> str | None:
    """A `mojo` executable beside the examined interpreter (a venv's bin/) or on PATH."""
    beside = Path(python).parent / "mojo"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("mojo")


def collect_environment(
    python: str | None = None, extra_packages: Iterable[str] = (), cancel: CancelScope | None = None
) -> Environment:
    """The inventory of this machine and of the interpreter ``python`` (default: the doctor's own).

    ``extra_packages`` adds distributions to look up beyond PACKAGES (what the probe catalog needs); ``cancel``
    stops the question put to another interpreter (raising Cancelled).
    """
    python = python or sys.executable
    names = PACKAGES + tuple(n for n in dict.fromkeys(extra_packages) if n not in PACKAGES)
    # NVML's initialisation waits on the driver (tens of milliseconds on a GPU machine) with the GIL released: it
    # runs beside the interpreter's facts and the programs the build facts ask.
    machine = Beside(_machine_facts, name="gpudoctor-nvml")
    environment = _interpreter_environment(python, names, cancel)
    driver, kernel_module, nvml_library, nodes = machine.result()
    return dataclasses.replace(
        environment,
        driver=driver,
        stack=dataclasses.replace(
            environment.stack, kernel_module=kernel_module, nvml_library=nvml_library, device_nodes=nodes
        ),
    )


def _machine_facts() -> tuple[Driver, str | None, str | None, DeviceNodes]:
    driver = query_driver()  # loads NVML's library, whose version is read from this process's maps next
    return driver, kernel_module_version(), loaded_library_version(), device_nodes_fact(device_nodes())


def _interpreter_environment(python: str, names: tuple[str, ...], cancel: CancelScope | None) -> Environment:
    """The inventory without the machine's NVIDIA facts (``_machine_facts``), which ``collect_environment`` adds."""
    if is_own_interpreter(python):
        packages = _local_packages(names)
        python_version = platform.python_version()
        implementation = platform.python_implementation()
        raw_stack: Any = _local_stack_facts()
    else:
        facts = _remote_facts(python, names, cancel)
        raw = facts["packages"]
        assert isinstance(raw, dict)
        packages = {str(k): (None if v is None else str(v)) for k, v in raw.items()}
        python_version = str(facts["python"])
        implementation = str(facts["implementation"])
        raw_stack = facts.get("stack")
    build, libraries = build_and_load_facts(raw_stack, python)
    host = Platform(
        python=python_version,
        python_implementation=implementation,
        os=platform.system(),
        os_release=_os_release(),
        kernel=platform.release() or None,
        libc=_libc(),
        machine=platform.machine(),
    )
    env_vars = {name: redact_text(os.environ[name]) for name in ENV_VARS if name in os.environ}
    mojo = find_mojo_cli(python)
    stack = dataclasses.replace(interpreter_facts(raw_stack), build=build, libraries=libraries)
    return Environment(
        platform=host,
        driver=Driver(status=NO_DRIVER),
        packages=packages,
        env_vars=env_vars,
        python_executable=redact_text(python),
        mojo_cli=None if mojo is None else redact_text(mojo),
        stack=stack,
    )
