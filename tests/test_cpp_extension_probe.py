"""The cpp-extension probe's kept build, with real builds by torch 2.13's cpp_extension on this CPU machine: built
once, then only loaded; a new folder whenever torch, the toolkit, the compiler or gpudoctor changes; failing as
users' builds fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

PROBES = ROOT / "probes"
SCRIPT = PROBES / "cpp_extension.py"

pytest.importorskip("torch")


def _run_probe(cache: Path, tmp_path: Path, *, env: dict[str, str] | None = None, prelude: str = "") -> dict[str, Any]:
    """The probe's cpu variant in a fresh interpreter, as the doctor starts it; its result event, with the wall
    time of the whole process added under "wall_s"."""
    channel = tmp_path / f"result-{time.monotonic_ns()}.jsonl"
    code = f"import runpy, sys\n{prelude}\nsys.argv = [{str(SCRIPT)!r}, '--device', 'cpu']\n"
    code += f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
    full_env = {**os.environ, "GPUDOCTOR_CACHE_DIR": str(cache), "GPUDOCTOR_RESULT_FILE": str(channel),
                "PYTHONPATH": str(PROBES), **(env or {})}  # fmt: skip
    started = time.monotonic()
    completed = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True, text=True,
                               check=False, timeout=600)  # fmt: skip
    events = [json.loads(line) for line in channel.read_text().splitlines()]
    result: dict[str, Any] = next(e for e in events if e["event"] == "result")
    result["wall_s"] = round(time.monotonic() - started, 2)
    result["steps"] = [e["name"] for e in events if e["event"] == "step" and e["name"] != "interpreter shutdown"]
    result["stderr"] = completed.stderr
    return result


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    """A cache two probes filled at the same time from cold (as the doctor's cpu variant and a second doctor
    would), then a third run after them: (cache, [the two concurrent results, the third])."""
    cache = tmp_path_factory.mktemp("cache")
    scratch = tmp_path_factory.mktemp("runs")
    with ThreadPoolExecutor(2) as pool:
        concurrent = list(pool.map(lambda _: _run_probe(cache, scratch), range(2)))
    yield cache, [*concurrent, _run_probe(cache, scratch)]


def test_built_once_then_only_loaded(warm_cache: tuple[Path, list[dict[str, Any]]]) -> None:
    cache, (first, second, third) = warm_cache
    for result in (first, second, third):
        assert result["status"] == "pass", result["stderr"][-3000:]
        assert result["details"]["built"] == ["add_one.cpp"]
    # One of the two concurrent runs built, the other waited for it and only loaded; never both, never corrupt.
    assert sorted([first["details"]["cache_hit"], second["details"]["cache_hit"]]) == [False, True]
    assert third["details"]["cache_hit"] is True
    assert len({r["details"]["build_directory"] for r in (first, second, third)}) == 1
    folder = Path(third["details"]["build_directory"])
    assert folder.parent == cache / "cpp-extension" and folder.name == "cpu-" + third["details"]["build_key"]
    cold = first if not first["details"]["cache_hit"] else second
    print(f"\ncpp-extension/cpu cold: build {cold['details']['build_seconds']} s, process {cold['wall_s']} s; "
          f"warm: build {third['details']['build_seconds']} s, process {third['wall_s']} s")  # fmt: skip


def test_a_build_killed_midway_does_not_hang_the_next(warm_cache: tuple[Path, list[dict[str, Any]]]) -> None:
    """cpp_extension's own lock is a file removed when its build ends; a build killed midway leaves it behind."""
    cache, runs = warm_cache
    (Path(runs[-1]["details"]["build_directory"]) / "lock").write_text("")
    result = _run_probe(cache, cache.parent)
    assert result["status"] == "pass" and result["details"]["cache_hit"] is True, result["stderr"][-3000:]


def _compiler_reporting(version: str, folder: Path) -> Path:
    """A c++ that builds with the real one but says it is another release (as an upgrade in place would)."""
    wrapper = folder / "c++"
    wrapper.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "c++ (Wrapped) {version}"; exit 0; fi\n'
                       'exec /usr/bin/c++ "$@"\n')  # fmt: skip
    wrapper.chmod(0o755)
    return wrapper


def test_another_compiler_builds_anew_and_never_loads_the_old(
    warm_cache: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    cache, runs = warm_cache
    result = _run_probe(cache, tmp_path, env={"CXX": str(_compiler_reporting("99.1.0", tmp_path))})
    assert result["status"] == "pass", result["stderr"][-3000:]
    assert result["details"]["cache_hit"] is False
    assert "99.1.0" in result["details"]["build_inputs"]["cxx"]
    assert result["details"]["build_directory"] != runs[-1]["details"]["build_directory"]


KEYS = """
import json, os, sys, types
import torch
from torch.utils import cpp_extension
from _cppbuild import build_key

def key(cuda=False, home=None):
    return build_key(types.SimpleNamespace(CUDA_HOME=home) if cuda else cpp_extension, cuda, sys.argv[1])[0]

keys = {"base": key()}
os.environ["GPUDOCTOR_VERSION"] = "99.0"
keys["gpudoctor"] = key()
del os.environ["GPUDOCTOR_VERSION"]
os.environ["CXX"] = sys.argv[2]
keys["compiler"] = key()
del os.environ["CXX"]
real = torch.__version__
torch.__version__ = "2.99.0+cpu"
keys["torch"] = key()
torch.__version__ = real
torch.version.cuda = "13.0"
keys["torch_cuda"] = key()
torch.version.cuda = None
for home in sys.argv[3:]:
    keys["toolkit " + home] = key(cuda=True, home=home)
os.environ["CC"] = sys.argv[2]
keys["nvcc host compiler"] = key(cuda=True, home=sys.argv[3])
del os.environ["CC"]
os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
keys["arch list"] = key(cuda=True, home=sys.argv[3])
keys["again"] = key()
print(json.dumps(keys))
"""


def _toolkit(folder: Path, release: str) -> Path:
    """A CUDA_HOME whose nvcc reports ``release`` (what the key reads of a toolkit)."""
    home = folder / f"cuda-{release}"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text(f'#!/bin/sh\necho "Cuda compilation tools, release {release}, V{release}.1"\n')
    nvcc.chmod(0o755)
    return home


def test_every_part_of_the_key_changes_the_folder(tmp_path: Path) -> None:
    """gpudoctor's version, the compiler, torch (its version, its CUDA), the toolkit behind one CUDA_HOME path, the
    host compiler nvcc is handed and the arch list each give another key; the same inputs give the same one."""
    toolkits = [str(_toolkit(tmp_path / "a", "12.8")), str(_toolkit(tmp_path / "b", "13.0"))]
    args = [str(SCRIPT), str(_compiler_reporting("99.1.0", tmp_path)), *toolkits]
    env = {k: v for k, v in os.environ.items() if k not in ("GPUDOCTOR_VERSION", "CXX", "CC", "TORCH_CUDA_ARCH_LIST")}
    completed = subprocess.run([sys.executable, "-c", KEYS, *args], env={**env, "PYTHONPATH": str(PROBES)},
                               capture_output=True, text=True, check=True, timeout=300)  # fmt: skip
    keys = json.loads(completed.stdout)
    again = keys.pop("again")
    assert again == keys["base"]
    assert len(set(keys.values())) == len(keys), keys


def test_the_doctor_tells_its_probes_its_version() -> None:
    from gpudoctor import __version__
    from gpudoctor.suite.caches import probe_environment

    assert probe_environment({"GPUDOCTOR_VERSION": "0.0.1"})["GPUDOCTOR_VERSION"] == __version__


def test_a_broken_compiler_fails_in_the_build_with_its_error(tmp_path: Path) -> None:
    """Where users' builds fail: cpp_extension's own check of the compiler (it runs ``$CXX --version``), then the
    compile that ninja runs, with the compiler's message; nothing of a failed build is taken for a cached one."""
    unrunnable = _run_probe(tmp_path / "cache", tmp_path, env={"CXX": "/bin/false"})
    assert unrunnable["status"] == "fail"
    assert unrunnable["steps"][-1].startswith("cpp_extension.load: build add_one.cpp")
    assert "'/bin/false', '--version'" in unrunnable["message"]
    assert "/bin/false" in unrunnable["details"]["build_inputs"]["cxx"]
    failing = tmp_path / "failing" / "c++"
    failing.parent.mkdir()
    failing.write_text('#!/bin/sh\nif [ "$1" = --version ]; then echo "c++ (Failing) 12.2.0"; exit 0; fi\n'
                       'echo "c++: fatal error: the compiler gave up" >&2; exit 1\n')  # fmt: skip
    failing.chmod(0o755)
    for _ in range(2):  # the second run builds again, and fails again
        result = _run_probe(tmp_path / "cache", tmp_path, env={"CXX": str(failing)})
        assert result["status"] == "fail" and result["exception_type"] == "RuntimeError"
        assert result["steps"][-1].startswith("cpp_extension.load: build add_one.cpp")
        assert "Error building extension" in result["message"]
        assert "the compiler gave up" in result["message"]
        assert "cache_hit" not in result["details"]


WRONG_ABI = """
from torch.utils import cpp_extension
real_load = cpp_extension.load
def load(*args, **kwargs):  # the binding built as a library with the other libstdc++ ABI would be
    kwargs["extra_cflags"] = [*kwargs.get("extra_cflags", []), "-U_GLIBCXX_USE_CXX11_ABI", "-D_GLIBCXX_USE_CXX11_ABI=0"]
    return real_load(*args, **kwargs)
cpp_extension.load = load
"""


def test_the_binding_still_links_against_torchs_cpp_abi(tmp_path: Path) -> None:
    """Without <torch/extension.h> the binding still uses torch's C++ ABI: built with the other
    _GLIBCXX_USE_CXX11_ABI it fails to load with the undefined torch symbol users see, which a mechanism names."""
    from gpudoctor.knowledge import load_knowledge

    result = _run_probe(tmp_path / "cache", tmp_path, prelude=WRONG_ABI)
    assert result["status"] == "fail"
    assert result["steps"][-1].startswith("cpp_extension.load: build add_one.cpp")
    assert "undefined symbol: _ZN5torch" in result["stderr"]
    (another_torch,) = [e for e in load_knowledge() if e.id == "extension-built-for-another-torch"]
    assert another_torch.in_run is not None
    assert any(pattern.search(result["stderr"]) for pattern in another_torch.in_run.patterns)


def test_without_ninja_the_build_fails_as_cpp_extension_says(tmp_path: Path) -> None:
    """The ninja-missing mechanism reads cpp_extension's own words, which the probe still meets at the build."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "c++").symlink_to("/usr/bin/c++")
    result = _run_probe(tmp_path / "cache", tmp_path, env={"PATH": str(tools)})
    assert result["status"] == "fail"
    assert result["steps"][-1].startswith("cpp_extension.load: build add_one.cpp")
    assert "Ninja is required to load C++ extensions" in result["message"]


def test_old_builds_are_pruned_but_not_the_one_in_use(warm_cache: tuple[Path, list[dict[str, Any]]]) -> None:
    cache, _ = warm_cache
    root = cache / "cpp-extension"
    real = [path.name for path in root.iterdir() if path.is_dir()]  # this test module's builds, all recent
    for index in range(20):  # builds of keys no longer used (older torch releases, say), least recent first
        (root / f"cpu-old{index:02d}").mkdir()
        (root / f"cpu-old{index:02d}.lock").write_text("")
        os.utime(root / f"cpu-old{index:02d}.lock", (1_000_000 + index, 1_000_000 + index))
    (root / "cuda-other").mkdir()  # another variant's build is not this one's to prune
    (root / "cuda-other.lock").write_text("")
    os.utime(root / "cuda-other.lock", (1, 1))
    result = _run_probe(cache, cache.parent)
    assert result["status"] == "pass" and result["details"]["cache_hit"] is True, result["stderr"][-3000:]
    kept = sorted(path.name for path in root.iterdir() if path.is_dir())
    newest = [f"cpu-old{index:02d}" for index in range(4 + len(real), 20)]  # with the real ones, 16 cpu builds
    assert "cpu-" + result["details"]["build_key"] in real
    assert kept == sorted([*real, "cuda-other", *newest])
    assert sorted(path.name for path in root.glob("*.lock")) == [name + ".lock" for name in kept]
