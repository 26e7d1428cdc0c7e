"""Finding compute-sanitizer (the toolkit's, on PATH, or pip's wheel in the examined site-packages) and planning the
instrumented reruns: none without a GPU (and the report says why), memcheck with the caching allocators off, the
hook that turns CuPy's pools off chaining to the program's own sitecustomize."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpudoctor.facts.sanitizer import WHEEL_BIN, find_sanitizer
from gpudoctor.instruments.reruns import HOOKS, Instrument, plan_reruns
from gpudoctor.instruments.triage import EXPERIMENTS, FailureClass

FAILED = EXPERIMENTS[FailureClass.MEMORY_FAULT]
PASSED = EXPERIMENTS[FailureClass.PASSED]


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\necho sanitizer\n")
    path.chmod(0o755)
    return path


def test_the_sanitizer_is_found_in_cuda_home_then_path_then_pips_wheel(tmp_path: Path) -> None:
    home = _executable(tmp_path / "cuda" / "bin" / "compute-sanitizer")
    on_path = _executable(tmp_path / "elsewhere" / "compute-sanitizer")
    wheel = _executable(tmp_path / "site" / WHEEL_BIN / "compute-sanitizer")
    site = [tmp_path / "site"]
    assert find_sanitizer({"CUDA_HOME": str(tmp_path / "cuda"), "PATH": str(on_path.parent)}, site).path == str(home)
    found = find_sanitizer({"PATH": str(on_path.parent)}, site)
    assert found is not None and (found.path, found.found_by) == (str(on_path), "PATH")
    if not Path("/usr/local/cuda/bin/compute-sanitizer").exists():
        found = find_sanitizer({"PATH": "/nonexistent"}, site)
        assert found is not None and (found.path, found.found_by) == (str(wheel), "pip wheel")
        assert find_sanitizer({"PATH": "/nonexistent"}, []) is None


def test_no_instrument_runs_without_a_gpu_and_each_says_why() -> None:
    # each instrument that would have run on a GPU says why it did not: a failure is rerun synchronously and under
    # memcheck, a passing command (`run --sanitize`) under memcheck and initcheck
    runs, not_run = plan_reruns(["python", "prog.py"], {}, gpus=0, sanitizer=None, wanted=FAILED)
    assert runs == [] and [n.instrument for n in not_run] == [Instrument.SYNCHRONOUS, Instrument.MEMCHECK]
    assert all("no GPU" in n.why for n in not_run)
    runs, not_run = plan_reruns(["python", "prog.py"], {}, gpus=0, sanitizer=None, wanted=PASSED)
    assert runs == [] and [n.instrument for n in not_run] == [Instrument.MEMCHECK, Instrument.INITCHECK]


def test_a_failed_program_is_rerun_synchronously_and_under_memcheck_with_the_allocators_off(tmp_path: Path) -> None:
    sanitizer = find_sanitizer({"PATH": str(_executable(tmp_path / "compute-sanitizer").parent)})
    runs, not_run = plan_reruns(["python", "prog.py"], {"PYTHONPATH": "/mine"}, gpus=1, sanitizer=sanitizer,
                                wanted=FAILED)  # fmt: skip
    assert not_run == [] and [r.instrument for r in runs] == [Instrument.SYNCHRONOUS, Instrument.MEMCHECK]
    assert runs[0].argv == ("python", "prog.py")
    assert runs[0].env == {"CUDA_LAUNCH_BLOCKING": "1", "MODULAR_DEBUG": "device-sync-mode,source-tracebacks"}
    memcheck = runs[1]
    assert memcheck.argv[:5] == (str(tmp_path / "compute-sanitizer"), "--tool", "memcheck", "--print-limit", "20")
    assert memcheck.env["PYTORCH_NO_CUDA_MEMORY_CACHING"] == "1"
    assert memcheck.env["PYTHONPATH"] == f"{HOOKS}:/mine"
    silent, _ = plan_reruns(["python", "prog.py"], {}, gpus=1, sanitizer=sanitizer, wanted=PASSED)
    assert [r.instrument for r in silent] == [Instrument.MEMCHECK, Instrument.INITCHECK]
    _, missing = plan_reruns(["python", "prog.py"], {}, gpus=1, sanitizer=None, wanted=FAILED)
    assert missing[0].instrument is Instrument.MEMCHECK and "nvidia-cuda-sanitizer-api" in missing[0].why


def test_the_allocator_hook_hands_over_to_the_programs_own_sitecustomize(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import builtins\nbuiltins.OWN_SITECUSTOMIZE = True\n")
    env = dict(os.environ, PYTHONPATH=f"{HOOKS}:{own}")
    probe = "import builtins, sys; print(getattr(builtins, 'OWN_SITECUSTOMIZE', 0), type(sys.meta_path[0]).__name__)"
    completed = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert completed.stdout.split() == ["True", "_PoolsOffAfterCupy"]


def test_the_inventory_lists_the_compute_sanitizer_the_instruments_would_run(tmp_path: Path) -> None:
    """Where compute-sanitizer is (here a CUDA_HOME holding one) is a fact of the inventory, in every face, and the
    report stays valid; without one the field is absent."""
    import json
    import os

    from conftest import run_cli, validate_report

    home = tmp_path / "cuda"
    _executable(home / "bin" / "compute-sanitizer")
    completed = run_cli("--no-probes", "--json", env={**os.environ, "CUDA_HOME": str(home)})
    document = json.loads(completed.stdout)
    validate_report(document)
    build = document["environment"]["stack"]["build"]
    assert build["compute_sanitizer"] == str(home / "bin" / "compute-sanitizer")
    assert build["compute_sanitizer_from"] == "CUDA_HOME"
    plain = run_cli("--no-probes", "--plain", env={**os.environ, "CUDA_HOME": str(home)}).stdout
    assert f"compute-sanitizer         {home / 'bin' / 'compute-sanitizer'} (from CUDA_HOME)" in plain
    empty = tmp_path / "empty"
    empty.mkdir()
    bare = json.loads(run_cli("--no-probes", "--json", env={**os.environ, "CUDA_HOME": str(empty)}).stdout)
    assert "compute_sanitizer" not in bare["environment"]["stack"]["build"]


def test_maxs_own_synchronous_switches_join_the_users_options_and_a_release_ignores_what_it_lacks() -> None:
    """MAX launches from its own threads, so CUDA_LAUNCH_BLOCKING alone does not make its error name the op: its
    options do. Appended to what the user set; real MAX here reads them (and ignores, with a warning, an option it
    does not know, so an older release runs the rerun as it is)."""
    from gpudoctor.instruments.reruns import synchronous_env

    assert synchronous_env({"MODULAR_DEBUG": "nan-check,source-tracebacks"})["MODULAR_DEBUG"] == (
        "nan-check,source-tracebacks,device-sync-mode"
    )
    program = (
        "from max.engine import InferenceSession as S; print(bool(S.debug.source_tracebacks), "
        "bool(S.debug.device_sync_mode))"
    )
    env = {**os.environ, **synchronous_env({"MODULAR_DEBUG": "not-an-option"})}
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.split() == ["True", "True"], done.stderr
    assert "unknown option 'not-an-option'; ignoring" in done.stderr
