"""`gpudoctor fleet` against a real local Ray cluster: a head and two worker nodes, each a raylet of its own on
this machine. One worker node has a different environment (a file named torch.py on its PYTHONPATH), and the
report must single it out; a node killed mid-run is reported lost while the others come back; Ctrl-C cancels
every remote task and leaves no process behind."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MARKER_ENV, processes_with_marker, synthetic_copy, tiny_wheel

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

HANG_ENV = "GPUDOCTOR_TEST_HANG_HERE"
# Passes everywhere, except on a node whose raylet has HANG_ENV set: there it hangs (for the kill and Ctrl-C tests).
HANGS_ON_ONE_NODE = """
import os, time
import _use_harness  # noqa: F401
from _harness import run_probe


def main(ctx):
    ctx.step("wait where told to")
    if os.environ.get("{hang}"):
        time.sleep(600)
    return "did not need to wait"


run_probe("maybe-hangs", main, devices=())
""".replace("{hang}", HANG_ENV)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Path]]:
    shadow = tmp_path_factory.mktemp("shadow")
    (shadow / "torch.py").write_text("raise ImportError('a file of mine named torch.py')\n")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    cluster.add_node(num_cpus=1, env_vars={"PYTHONPATH": str(shadow)})
    try:
        yield cluster, shadow
    finally:
        cluster.shutdown()


@pytest.fixture
def small_cluster() -> Iterator[Cluster]:
    """A cluster of its own (a head and one worker) for the tests that kill or stop a node: a removed node can
    stay listed as alive for a while, which must not reach the other tests."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    try:
        yield cluster
    finally:
        cluster.shutdown()


def _fleet(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpudoctor", "fleet", *args],
        capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


def test_the_node_with_another_environment_is_singled_out(cluster: tuple[Cluster, Path], tmp_path: Path) -> None:
    head, _ = cluster
    junit = tmp_path / "fleet.xml"
    completed = _fleet("--address", head.address, "--only", "torch-env", "--json", "--junit", str(junit))
    assert completed.returncode == 1, completed.stderr  # one node has a problem
    document = json.loads(completed.stdout)
    assert [n["status"] for n in document["nodes"]] == ["done", "done", "done"]
    assert len(document["groups"]) == 2 and len(document["groups"][0]["nodes"]) == 2
    (odd,) = document["odd_ones_out"]
    odd_label = document["groups"][1]["nodes"][0]
    assert odd["label"] == odd_label and odd["majority_size"] == 2
    assert {"kind": "outcome", "run": "torch-env/cpu", "here": "fail", "there": "pass"} in odd["differences"]
    assert {"kind": "finding", "finding": "module-shadows-package", "here": True} in odd["differences"]
    for node in document["nodes"]:  # each node's own report came back whole
        assert node["host"] is None and node["reports"][0]["environment"]["packages"]["torch"]
    host = socket.gethostname()  # as a word: a short host name ("vm") is also inside "libnvvm.so"
    assert re.search(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", completed.stdout) is None or len(host) < 2
    from junitparser import Failure, JUnitXml  # the same report for CI: a suite per node, read by a real parser

    suites = {suite.name: suite for suite in JUnitXml.fromfile(str(junit))}
    assert set(suites) == {"node 1", "node 2", "node 3"}
    failing = [case for case in suites[odd_label] if any(isinstance(r, Failure) for r in case.result)]
    assert [case.name for case in failing] == ["torch-env/cpu", "module-shadows-package"]  # run, then pre-flight


def test_a_users_kernel_runs_on_every_node(cluster: tuple[Cluster, Path]) -> None:
    """`--kernel` runs `gpudoctor kernel` on each node with real MAX: its CPU branch (a placeholder writing
    zeros) fails against the reference wherever torch imports; the shadowed node stands out."""
    head, _ = cluster
    kernel = Path(__file__).parent / "kernels" / "cpu_zeros"
    completed = _fleet(
        "--address", head.address, "--kernel", str(kernel), "--op", "double", "--shape", "4x4",
        "--reference", "x0 * 2", "--json",
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr
    document = json.loads(completed.stdout)
    assert [n["status"] for n in document["nodes"]] == ["done", "done", "done"]
    majority = document["groups"][0]
    assert len(majority["nodes"]) == 2 and majority["outcomes"]["kernel/cpu"] == "fail"
    assert "kernel-differs-from-reference" in majority["findings"]
    assert len(document["odd_ones_out"]) == 1


def test_contribute_records_one_row_per_group_of_nodes(cluster: tuple[Cluster, Path], tmp_path: Path) -> None:
    """Two groups (the shadowed node and the others) give two reports; with the same environment key they merge
    into one row that records the disagreement, and the rows pass `matrix check`."""
    import tomllib

    head, _ = cluster
    matrix = tmp_path / "matrix"
    completed = _fleet("--address", head.address, "--only", "torch-env", "--contribute", "--matrix", str(matrix))
    assert completed.returncode == 1, completed.stderr
    rows = sorted((matrix / "rows").glob("*.toml"))
    assert rows and sum(len(tomllib.loads(p.read_text())["reports"]) for p in rows) == 2
    result = next(iter(tomllib.loads(rows[0].read_text())["results"].values()))
    assert result["runs"] == 2 and result["agreeing"] == 1
    check = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "matrix", "check", "--matrix", str(matrix)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr


def test_hosts_are_shown_only_when_asked(cluster: tuple[Cluster, Path]) -> None:
    head, _ = cluster
    plain = _fleet("--address", head.address, "--no-probes")
    shown = _fleet("--address", head.address, "--no-probes", "--show-hosts")
    # Inventory only: the pre-flight check alone tells the shadowed node apart (a problem finding: exit 1).
    assert plain.returncode == shown.returncode == 1, plain.stderr + shown.stderr
    assert "finding module-shadows-package only there" in plain.stdout
    address = head.address.rsplit(":", 1)[0]
    assert f"({address})" not in plain.stdout and f"({address})" in shown.stdout
    markdown = _fleet("--address", head.address, "--no-probes", "--markdown")
    assert "### Odd ones out" in markdown.stdout and "| node 1 | done |" in markdown.stdout


def test_an_unreachable_address_fails_quickly_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    completed = _fleet("--address", f"127.0.0.1:{port}", timeout=60)
    assert time.monotonic() - started < 15
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"gpudoctor: error: cannot reach the Ray cluster at 127.0.0.1:{port}")


def test_without_ray_the_extra_to_install_is_named() -> None:
    code = "import sys; sys.modules['ray'] = None\nfrom gpudoctor.program import main\nsys.exit(main(['fleet']))"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert completed.returncode == 2
    assert completed.stderr.strip() == (
        'gpudoctor: error: gpudoctor fleet needs Ray, an optional extra: pip install "gpudoctor[fleet]"'
    )


def _hanging_node_run(head: Cluster, tmp_path: Path, marker: str, *extra: str) -> tuple[subprocess.Popen[str], Any]:
    """A third node that hangs in its probe, and a fleet run over all three, started; returns once it hangs."""
    probes = synthetic_copy(
        tmp_path,
        '[[probe]]\nid = "maybe-hangs"\nscript = "maybe_hangs.py"\ntitle = "hangs on one node"\ntimeout_s = 600\n',
    )
    (probes / "maybe_hangs.py").write_text(HANGS_ON_ONE_NODE)
    node = head.add_node(num_cpus=1, env_vars={HANG_ENV: "1", MARKER_ENV: marker})
    fleet = subprocess.Popen(
        [sys.executable, "-m", "gpudoctor", "fleet", "--address", head.address, "--probes", str(probes), "--json",
         *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while len(processes_with_marker(marker)) < 2:  # the raylet's worker, its doctor, the hanging probe ...
        assert time.monotonic() < deadline and fleet.poll() is None, fleet.stderr.read() if fleet.stderr else ""
        time.sleep(0.2)
    time.sleep(2.0)
    return fleet, node


def test_a_node_killed_mid_run_is_lost_and_the_others_come_back(small_cluster: Cluster, tmp_path: Path) -> None:
    """The node's processes may die by SIGKILL with it, its doctor's included: whatever scratch folder that leaves is
    removed by the next run (process.scratch), so nothing of this run stays under the temporary folder."""
    from gpudoctor.process.scratch import remove_abandoned

    marker = uuid.uuid4().hex
    scratch_before = set(Path(tempfile.gettempdir()).glob("gpudoctor-*"))
    fleet, node = _hanging_node_run(small_cluster, tmp_path, marker)
    try:
        small_cluster.remove_node(node, allow_graceful=False)
        stdout, stderr = fleet.communicate(timeout=120)
    finally:
        if fleet.poll() is None:
            fleet.kill()
    assert fleet.returncode == 1, stderr
    document = json.loads(stdout)
    statuses = sorted(n["status"] for n in document["nodes"])
    assert statuses == ["done", "done", "lost"], document["odd_ones_out"]
    assert any(odd["status"] == "lost" and odd["reason"] for odd in document["odd_ones_out"])
    _wait_gone(marker)
    remove_abandoned(setting_up_s=0)  # as the next run does (it waits a minute for folders being set up)
    assert set(Path(tempfile.gettempdir()).glob("gpudoctor-*")) <= scratch_before


def test_a_node_that_does_not_answer_in_time_is_reported_timed_out(small_cluster: Cluster, tmp_path: Path) -> None:
    """The node's doctor past its limit is stopped as a Ctrl-C stops it (SIGTERM, then SIGKILL after a grace), so it
    stops its probes and leaves no temporary folder behind (a SIGKILL at once used to leave two)."""
    marker = uuid.uuid4().hex
    scratch_before = set(Path(tempfile.gettempdir()).glob("gpudoctor-*"))
    fleet, _ = _hanging_node_run(small_cluster, tmp_path, marker, "--node-timeout", "8")
    try:
        stdout, stderr = fleet.communicate(timeout=120)
    finally:
        if fleet.poll() is None:
            fleet.kill()
    assert fleet.returncode == 1, stderr
    document = json.loads(stdout)
    statuses = sorted(n["status"] for n in document["nodes"])
    assert statuses == ["done", "done", "timeout"], statuses
    timed_out = [odd for odd in document["odd_ones_out"] if odd["status"] == "timeout"]
    assert any(odd["reason"].startswith("no answer within 8 s") for odd in timed_out)
    _wait_gone(marker)
    assert set(Path(tempfile.gettempdir()).glob("gpudoctor-*")) <= scratch_before


def test_ctrl_c_cancels_every_remote_task_and_keeps_the_nodes_that_answered(
    small_cluster: Cluster, tmp_path: Path
) -> None:
    marker = uuid.uuid4().hex
    fleet, _ = _hanging_node_run(small_cluster, tmp_path, marker)
    try:
        fleet.send_signal(signal.SIGINT)
        stdout, stderr = fleet.communicate(timeout=60)
    finally:
        if fleet.poll() is None:
            fleet.kill()
    assert fleet.returncode == 130, stderr
    document = json.loads(stdout)
    statuses = [n["status"] for n in document["nodes"]]
    # The hanging node did not answer; the others answered (kept, with their reports) unless they were still
    # running on this busy machine when the signal came.
    assert "interrupted" in statuses and set(statuses) <= {"done", "interrupted"}, statuses
    assert all(n["reports"] for n in document["nodes"] if n["status"] == "done")
    _wait_gone(marker)


def _wait_gone(marker: str) -> None:
    """No process of the hanging node's run survives (the doctor dies with its worker and stops its probe)."""
    deadline = time.monotonic() + 30
    while [p for p in processes_with_marker(marker) if not _is_raylet_side(p)]:
        assert time.monotonic() < deadline, processes_with_marker(marker)
        time.sleep(0.2)


def _is_raylet_side(pid: int) -> bool:
    """Ray's own processes on the node (raylet, its workers): they carry the node's environment too."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return True
    return "gpudoctor" not in command and "maybe_hangs" not in command


def _recorded_fleet(name: str = "fleet-h100.json") -> tuple[dict[str, Any], list[Any]]:
    """A fleet run recorded on a GPU machine (tests/fixtures/fleet-*.json), and its nodes read back."""
    from gpudoctor.fleet.report import NodeRun, NodeStatus
    from gpudoctor.report.codec import decode

    document = json.loads((Path(__file__).parent / "fixtures" / name).read_text())
    nodes = [
        NodeRun(n["label"], NodeStatus(n["status"]), tuple(decode(r) for r in n["reports"]), n["reason"],
                n["host"], n["duration_s"])
        for n in document["nodes"]
    ]  # fmt: skip
    return document, nodes


def test_the_recorded_fleet_analysed_again_gives_the_same_json() -> None:
    """The JSON of a fleet report is a file others read: analysing the recorded run's nodes again writes it byte
    for byte as it was recorded."""
    from gpudoctor.fleet.report import analyse

    document, nodes = _recorded_fleet()
    again = analyse(nodes, document["created"], document["doctor_version"])
    recorded = (Path(__file__).parent / "fixtures" / "fleet-h100.json").read_text()
    assert json.dumps(again.to_dict(), indent=2) + "\n" == recorded


def test_the_analysis_returns_data_and_the_faces_word_it() -> None:
    """Outcomes are Outcome values, what sets a node apart is a list of differences, and the odd nodes are data;
    the JSON, the plain text and the fleet view word them."""
    import dataclasses

    from gpudoctor.fleet.render import fleet_markdown, fleet_text, odd_one_line
    from gpudoctor.fleet.report import (
        EnvironmentDifference,
        FindingDifference,
        NodeRun,
        NodeStatus,
        OddNode,
        OutcomeDifference,
        analyse,
        shows_as_problem,
    )
    from gpudoctor.model import Finding, Outcome
    from gpudoctor.tui.fleet_app import node_details, node_problems

    _, (node,) = _recorded_fleet()
    cpu, gpu = node.reports
    other_torch = dataclasses.replace(
        cpu, environment=dataclasses.replace(cpu.environment, packages={**cpu.environment.packages, "torch": "9.9"})
    )
    cut = tuple(dataclasses.replace(r, outcome=Outcome.INTERRUPTED) if r.id == "max-import" else r for r in cpu.results)
    shadowed = Finding("module-shadows-package", "a file shadows a package", ("torch.py",), "x", "y")
    interrupted = dataclasses.replace(cpu, results=cut, findings=(shadowed,))
    nodes = [
        dataclasses.replace(node, label="node 1"),
        dataclasses.replace(node, label="node 2"),
        dataclasses.replace(node, label="node 3", reports=(other_torch, gpu)),
        dataclasses.replace(node, label="node 4", reports=(interrupted, gpu)),
        NodeRun("node 5", NodeStatus.LOST, reason="NodeDiedError"),
    ]
    report = analyse(nodes, "2025-01-01T00:00:00Z", "0.test")

    assert nodes[3].outcomes["max-import"] is Outcome.INTERRUPTED
    assert all(isinstance(outcome, Outcome) for outcome in report.groups[0].outcomes.values())
    assert report.odd_ones == (
        OddNode("node 3", 3, 5, NodeStatus.DONE, "", (EnvironmentDifference("torch", "9.9", "2.11.0"),), 2),
        OddNode(
            "node 4", 4, 5, NodeStatus.DONE, "",
            (OutcomeDifference("max-import", Outcome.INTERRUPTED, Outcome.PASS),
             FindingDifference("module-shadows-package", here=True)),
            2,
        ),
        OddNode("node 5", 5, 5, NodeStatus.LOST, "NodeDiedError"),
    )  # fmt: skip
    sentences = [
        "node 3 (3 of 5): torch 9.9 vs 2.11.0 on the others",
        "node 4 (4 of 5): max-import interrupted only there (pass on the others); "
        "finding module-shadows-package only there",
        "node 5 (5 of 5): lost: NodeDiedError",
    ]
    assert [odd_one_line(odd) for odd in report.odd_ones] == sentences
    as_json = report.to_dict()  # the same data, no sentence: the faces word it (fleet schema 1)
    assert as_json["fleet_schema_version"] == 1
    assert as_json["odd_ones_out"] == [
        {"label": "node 3", "position": 3, "total": 5, "status": "done", "reason": "", "majority_size": 2,
         "differences": [{"kind": "environment", "key": "torch", "here": "9.9", "there": "2.11.0"}]},
        {"label": "node 4", "position": 4, "total": 5, "status": "done", "reason": "", "majority_size": 2,
         "differences": [{"kind": "outcome", "run": "max-import", "here": "interrupted", "there": "pass"},
                         {"kind": "finding", "finding": "module-shadows-package", "here": True}]},
        {"label": "node 5", "position": 5, "total": 5, "status": "lost", "reason": "NodeDiedError",
         "majority_size": 0, "differences": []},
    ]  # fmt: skip
    assert as_json["nodes"][3]["outcomes"]["max-import"] == "interrupted"
    assert json.loads(json.dumps(as_json)) == as_json  # plain JSON values, no enums

    # One predicate for "a problem" in the fleet's faces: everything but pass and skipped, interrupted included
    # (unlike Outcome.is_problem, which makes the doctor exit 1).
    assert [o for o in Outcome if shows_as_problem(o)] == [
        Outcome.FAIL, Outcome.CRASH, Outcome.TIMEOUT, Outcome.INTERRUPTED
    ]  # fmt: skip
    assert not Outcome.INTERRUPTED.is_problem
    assert nodes[3].problems == ("max-import",) and node_problems(nodes[3]) == "max-import"
    assert node_problems(nodes[0]) == "none" and node_problems(nodes[4]) == "NodeDiedError"
    text = fleet_text(report)
    assert "\n".join(f"    {line}" for line in sentences) in text
    assert "  group 3: node 4\n" in text and "    problems: max-import\n" in text
    assert "| 3 | node 4 |" in fleet_markdown(report) and "| max-import |" in fleet_markdown(report)
    details = node_details(nodes[3], report).plain
    assert "what sets it apart:\nmax-import interrupted only there (pass on the others); finding" in details
    assert any(line.startswith("  interrupted") and line.endswith("max-import") for line in details.splitlines())


def test_the_recorded_gpu_fleet_run_has_per_gpu_results_and_no_host() -> None:
    """The run recorded on the H100 (docs/fleet.md): one node, its CPU run and its GPU run, all passing."""
    document = json.loads((Path(__file__).parent / "fixtures" / "fleet-h100.json").read_text())
    (node,) = document["nodes"]
    assert node["status"] == "done" and node["host"] is None and len(node["reports"]) == 2
    gpu_runs = {k: v for k, v in node["outcomes"].items() if k.endswith(":gpu0")}
    assert len(gpu_runs) == 11 and set(gpu_runs.values()) == {"pass"}
    assert node["environment"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert document["odd_ones_out"] == [] and len(document["groups"]) == 1


def test_the_fleet_view_shows_the_nodes_and_what_sets_the_odd_one_apart(cluster: tuple[Cluster, Path]) -> None:
    """The TUI's fleet view through Pilot against the local cluster: a row per node, the odd one out named at
    the top, and selecting that node shows what differs; q after the run exits with the fleet's status."""
    import asyncio

    asyncio.run(_fleet_view(cluster[0].address))


async def _fleet_view(address: str) -> None:
    from gpudoctor.fleet.ray_runner import FleetOptions
    from gpudoctor.tui.fleet_app import FleetApp

    app = FleetApp(FleetOptions(address=address, doctor_args=("--only", "torch-env"), quiet=True))
    async with app.run_test(size=(160, 45)) as pilot:
        deadline = time.monotonic() + 300
        while app.report is None:
            assert app.failure is None, app.failure
            assert time.monotonic() < deadline, f"the fleet did not finish: {app.nodes}"
            await pilot.pause(0.2)
        table = app.query_one("#nodes")
        assert table.row_count == 3  # type: ignore[attr-defined]
        odd = str(app.query_one("#odd").render())
        assert "odd ones out" in odd and "torch-env/cpu fail only there" in odd
        odd_label = app.report.groups[1].labels[0]
        for _ in range(3):
            if app._selected() == odd_label:
                break
            await pilot.press("down")
        details = str(app.query_one("#node-details").render())
        assert f"{odd_label}: done" in details and "what sets it apart" in details
        assert "module-shadows-package" in details
        await pilot.press("q")
    assert app.return_value == 1


def test_sweep_spreads_its_cells_over_the_cluster(cluster: tuple[Cluster, Path], tmp_path: Path) -> None:
    """`gpudoctor sweep --ray`: each cell is a task on some node (built and examined there; the cells inherit
    this interpreter's packages, as in test_sweep), and the rows are merged into this machine's matrix."""
    import tomllib
    from importlib.metadata import version

    head, _ = cluster
    (tmp_path / "matrix" / "rows").mkdir(parents=True)
    completed = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "sweep", "--ray", "--address", head.address,
         "--torch", version("torch"), "--max", version("max"), "--only", "max-import",
         "--envs", str(tmp_path / "envs"), "--matrix", str(tmp_path / "matrix"), "--inherit", sys.executable,
         "--json"],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert completed.stdout, completed.stderr[-3000:]
    grid = json.loads(completed.stdout)
    (cell,) = grid["cells"]
    assert cell["status"] in ("healthy", "problem"), cell  # the shadowed node may have taken it
    rows = list((tmp_path / "matrix" / "rows").glob("*.toml"))
    assert len(rows) == 1 and tomllib.loads(rows[0].read_text())["environment"]["max"] == version("max")


def test_bisect_examines_its_cells_on_the_cluster(cluster: tuple[Cluster, Path], tmp_path: Path) -> None:
    """`gpudoctor bisect --ray`: each round's cells are tasks on the cluster's nodes (installed offline from a
    wheelhouse of tiny `max` wheels there), their reports kept on this machine, and the change found."""
    head, _ = cluster
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for release in ("92.1.0", "92.2.0", "92.3.0", "92.4.0", "92.5.0", "92.6.0"):
        tiny_wheel(wheels, "max", release)
    script = tmp_path / "repro.py"
    script.write_text("import sys\nfrom importlib.metadata import version\n"
                      "sys.exit(int(version('max').split('.')[1]) >= 4)\n")  # fmt: skip
    completed = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "bisect", "--ray", "--address", head.address, "--parallel", "2",
         "--max", "92.1..92.6", "--find-links", str(wheels), "--offline", "--inherit", sys.executable,
         "--envs", str(tmp_path / "envs"), "--json", "--", "python", str(script)],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert completed.stdout, completed.stderr[-3000:]
    report = json.loads(completed.stdout)
    assert [(t["before"], t["after"], t["exact"]) for t in report["transitions"]] == [("92.3.0", "92.4.0", True)]
    for cell in report["cells"]:
        assert (tmp_path / "envs" / cell["report"]).is_file()  # kept here, as a local bisect keeps them


def test_bisect_package_examines_its_pinned_cells_on_the_cluster(cluster: tuple[Cluster, Path], tmp_path: Path) -> None:
    """`gpudoctor bisect --package NAME A..B --ray`: the cells (the examined environment pinned, each release of
    tinylib installed over what the others declare, offline from a wheelhouse) are tasks on the cluster's nodes; the
    change is found and what tinyuser declares is named, as a local bisect does (tests/test_bisect_package.py)."""
    from test_bisect_package import RELEASES, make_examined, make_wheelhouse

    (tmp_path / "wheels").mkdir()
    wheels = make_wheelhouse(tmp_path / "wheels")
    examined = make_examined(wheels, tmp_path / "examined")
    completed = subprocess.run(
        [sys.executable, "-m", "gpudoctor", "bisect", "--ray", "--address", cluster[0].address, "--parallel", "2",
         "--package", "tinylib", "1.0..1.5", "--python", str(examined), "--find-links", str(wheels), "--offline",
         "--envs", str(tmp_path / "envs"), "--no-debugger", "--json", "--", "python", "-c",
         "import tinyuser; print(tinyuser.helper())"],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert completed.returncode == 1 and completed.stdout, completed.stderr[-3000:]
    report = json.loads(completed.stdout)
    assert report["package"] == "tinylib" and report["versions"] == RELEASES
    assert [(t["before"], t["after"], t["exact"]) for t in report["transitions"]] == [("1.2.0", "1.3.0", True)]
    assert any(line.startswith("tinyuser 1.0.0 declares tinylib==1.0.0; 1.3.0 breaks it") for line in report["verdict"])
    for cell in report["cells"]:
        assert (tmp_path / "envs" / cell["report"]).is_file()  # kept here, as a local bisect keeps them


def test_two_gpus_of_one_host_recorded_with_one_raylet_and_with_a_raylet_per_gpu() -> None:
    """Recorded on the two-H200 kind with scripts/fleet_two_gpus.py (Ray 2.60, torch 2.11 cu130): one raylet told
    of both GPUs runs the doctor on the CPU and on gpu0 and gpu1, each with only that GPU visible, all passing; a
    raylet per GPU (CUDA_VISIBLE_DEVICES=0 and =1) where the second has a file named torch.py first on its
    PYTHONPATH is the odd one out, named with what sets it apart. Analysed again, both give the JSON recorded, and
    neither carries a GPU UUID or a host name."""
    from gpudoctor.fleet.report import analyse

    for name in ("fleet-h200x2-one-raylet.json", "fleet-h200x2-raylet-per-gpu.json"):
        document, nodes = _recorded_fleet(name)
        again = analyse(nodes, document["created"], document["doctor_version"])
        recorded = (Path(__file__).parent / "fixtures" / name).read_text()
        assert json.dumps(again.to_dict(), indent=2) + "\n" == recorded
        assert "GPU-" not in recorded and all(node["host"] is None for node in document["nodes"])
    one, _ = _recorded_fleet("fleet-h200x2-one-raylet.json")
    (node,) = one["nodes"]
    assert node["environment"]["gpu_count"] == 2 and one["odd_ones_out"] == []
    assert {run for run in node["outcomes"] if ":" in run} == {
        f"{probe}/cuda:{gpu}" for gpu in ("gpu0", "gpu1")
        for probe in ("torch-env", "cffi-cuda-init", "fork-after-init", "cuda-graph-arg-lifetime")
    }  # fmt: skip
    assert set(node["outcomes"].values()) == {"pass"}
    per_gpu, nodes = _recorded_fleet("fleet-h200x2-raylet-per-gpu.json")
    assert [n["label"] for n in per_gpu["nodes"]] == ["node 1", "node 2"]
    (odd,) = per_gpu["odd_ones_out"]
    assert (odd["label"], odd["position"], odd["total"]) == ("node 2", 2, 2)
    assert {"kind": "outcome", "run": "torch-env/cpu", "here": "fail", "there": "pass"} in odd["differences"]
    assert {"kind": "finding", "finding": "module-shadows-package", "here": True} in odd["differences"]
    from gpudoctor.fleet.render import odd_one_line  # worded by the faces, as the JSON held it before schema 1

    (worded,) = [odd_one_line(o) for o in analyse(nodes, per_gpu["created"], per_gpu["doctor_version"]).odd_ones]
    assert worded == (
        "node 2 (2 of 2): torch_cuda absent vs 13.0 on the other; fork-after-init/cuda:gpu0 did not run only there "
        "(pass on the other); torch-env/cpu fail only there (pass on the other); torch-env/cuda:gpu0 fail only there "
        "(pass on the other); finding module-shadows-package only there"
    )
