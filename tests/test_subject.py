"""One examination pipeline over subjects (``doctor.examine``): the probe suite, a kernel package and a user's command
each plan, run and fingerprint themselves, and a face hears every kind through the same ``Events``."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SYNTHETIC, TESTS, synthetic_copy

from gpudoctor.doctor import DoctorOptions, examine
from gpudoctor.errors import GpuDoctorError
from gpudoctor.examination import Events
from gpudoctor.facts.inventory import collect_environment
from gpudoctor.kernel.calls import CallRequest
from gpudoctor.kernel.subject import KernelPackage, kernel_probe
from gpudoctor.model import Device, Outcome, ProbeResult
from gpudoctor.reproducer.command import RUN_ID, Reproducer, fingerprint, fingerprint_key
from gpudoctor.reproducer.subject import UserCommand
from gpudoctor.subject import ProbeSuite, Subject
from gpudoctor.suite.catalog import KERNEL, default_probe_dir, load_catalog
from gpudoctor.suite.schedule import PlannedRun

CONTROL = ROOT / "kernels" / "mojo1" / "control"


def test_the_kernel_probe_is_declared_in_the_catalog_and_only_the_kernel_runs_it() -> None:
    suite = {spec.id for spec in load_catalog(default_probe_dir())}
    (kernel,) = load_catalog(default_probe_dir(), KERNEL)
    assert kernel == kernel_probe(default_probe_dir())
    assert kernel.id == "kernel" and kernel.id not in suite  # `gpudoctor` never runs it, nor records it in a row
    assert kernel.script == "kernel.py" and kernel.needs_packages == ("torch", "max")
    assert kernel.devices == (Device.CPU, Device.CUDA) and kernel.timeout_s == 600.0
    assert {"compared_with_cpu", "differs_from_cpu", "not_repeatable"} <= set(kernel.details)
    # issue 39's experiments and issue 36's instruments declare what they write, like every probe's detail
    assert {"ignores_inputs", "accumulates_into_output", "sanitizer_errors", "sanitizer_found"} <= set(kernel.details)
    assert len(kernel.details) == len(set(kernel.details)) == 21


def test_a_catalog_entry_for_an_unknown_subject_is_refused(tmp_path: Path) -> None:
    probes = synthetic_copy(
        tmp_path, '[[probe]]\nid = "passes"\nscript = "passes.py"\ntitle = "passes"\nsubject = "fleet"\n'
    )
    with pytest.raises(GpuDoctorError, match=r"probe #1: field 'subject' must be one of 'suite', 'kernel'"):
        load_catalog(probes)


def test_a_catalog_without_the_kernels_probe_says_so(tmp_path: Path) -> None:
    with pytest.raises(GpuDoctorError, match="no 'kernel' probe marked subject = 'kernel'"):
        kernel_probe(SYNTHETIC)


def test_every_subject_is_examined_through_one_path_and_heard_through_one_events() -> None:
    """The probe suite and a user's command, through ``examine`` with the same Events: the plan first (the command
    plans no probe run), then each result as it ends; the report is the one every face shows."""
    command = UserCommand(Reproducer((sys.executable, "-c", "print('fine')"), timeout_s=60))
    suite = ProbeSuite(SYNTHETIC, only=("passes", "raises"), devices=(Device.CPU,))
    for subject, expected in ((suite, {"passes/cpu": Outcome.PASS, "raises": Outcome.FAIL}), (command, None)):
        plans: list[list[str]] = []
        started: list[PlannedRun] = []
        ended: list[ProbeResult] = []
        events = Events(plan=lambda _, planned, into=plans: into.append([run.run_id for run in planned]),
                        start=started.append, result=ended.append)  # fmt: skip
        report = examine(subject, DoctorOptions(jobs=2), events)
        assert sorted(r.id for r in ended) == sorted(r.id for r in report.results)
        if expected is None:
            assert plans == [[]] and started == []
            (result,) = report.results
            assert result.id == RUN_ID and result.outcome is Outcome.PASS
        else:
            assert len(plans) == 1 and sorted(plans[0]) == sorted(expected) == sorted(r.run_id for r in started)
            assert {r.id: r.outcome for r in report.results} == expected
        assert report.kernel is None


def test_inventory_only_plans_nothing_for_any_subject() -> None:
    plans: list[int] = []
    events = Events(plan=lambda environment, planned: plans.append(len(planned)))
    command = UserCommand(Reproducer(("false",)))
    for subject in (ProbeSuite(SYNTHETIC), command):
        report = examine(subject, DoctorOptions(run_probes=False, jobs=1), events)
        assert report.results == ()
    assert plans == [0, 0]


def test_a_kernel_package_plans_the_control_next_to_it_and_scans_before_anything_runs(tmp_path: Path) -> None:
    """KernelPackage.load checks the path, scans the package and resolves the calls (usage errors first); its plan
    puts the control next to the kernel on the CPU, and the GPU runs compare with the CPU run's saved results."""
    with pytest.raises(GpuDoctorError, match="no such file or directory"):
        KernelPackage.load(tmp_path / "missing")
    with pytest.raises(GpuDoctorError):
        KernelPackage.load(CONTROL, (CallRequest(op="no_such_op", where="--op no_such_op"),))
    package = KernelPackage.load(
        CONTROL, (CallRequest(op="add_one", where="--op add_one", shape=(2, 3)),), timeout_s=90
    )
    assert [op.name for op in package.scan.ops] and len(package.calls) == 1
    environment = collect_environment(sys.executable)
    planned = package.plan(environment, sys.executable, tmp_path)
    ids = [run.run_id for run in planned]
    assert ids[:2] == ["custom-op/cpu", "kernel/cpu"]
    assert all(run.invocation.timeout_s == 90 for run in planned)
    cpu_kernel = planned[1].invocation.spec.args
    assert cpu_kernel[-2:] == ("--save", str(tmp_path / "cpu-results.pt"))
    gpu_kernels = [run for run in planned if run.run_id.startswith("kernel/cuda")]
    assert all("--cpu-done" in run.invocation.spec.args for run in gpu_kernels)
    section = package.section(environment, [])
    assert section is not None and section["package"].endswith("control") and len(section["calls"]) == 1


def test_what_a_sweep_keeps_cells_under_is_each_subjects_fingerprint() -> None:
    """The sweep asks the subject, never its kind: the probes' selection, the kernel's package and calls, the
    command's own fingerprint and folder (runs of different commands never mix)."""
    assert ProbeSuite(only=("b", "a"), timeout_s=5.0).fingerprint().request == {"only": ["a", "b"], "timeout_s": 5.0}
    assert ProbeSuite().fingerprint().folder is None
    requests = (CallRequest(op="add_one", where="--op add_one", shape=(2, 3)),)
    kernel = KernelPackage.load(CONTROL, requests).fingerprint()
    assert kernel.request == {
        "only": None,
        "timeout_s": None,
        "kernel": str(CONTROL),
        "kernel_calls": [repr(r) for r in requests],
        "sanitize": False,  # a cell run under compute-sanitizer is kept apart from one run plainly
    }
    reproducer = Reproducer(("python", str(TESTS / "reproducers" / "segfault_in_thread.py")))
    command = UserCommand(reproducer).fingerprint()
    assert command.request == {"only": None, "timeout_s": None, "reproducer": fingerprint(reproducer)}
    assert command.folder == f"reproducer-{fingerprint_key(reproducer)}"


def test_every_subject_is_a_subject() -> None:
    subjects: list[Subject] = [
        ProbeSuite(),
        KernelPackage.load(CONTROL),
        UserCommand(Reproducer(("true",))),
    ]
    assert [s.records_matrix_row for s in subjects] == [True, False, False]
    assert [s.title for s in subjects] == ["the probes", "your kernel", "your command"]
    assert [bool(s.matrix_probes()) for s in subjects] == [True, False, False]
    assert [pickle.loads(pickle.dumps(s)) for s in subjects] == subjects  # a sweep's cells travel to Ray nodes
