"""The doctor on every alive node of a Ray cluster: one task pinned to each node runs `gpudoctor --json` there in
a process of its own (the same isolation as a local run), once for the CPU and once per GPU with only that GPU
visible. gpudoctor travels by Ray's runtime environment (``py_modules``), never by hand.

The only module that imports Ray (the optional extra ``gpudoctor[fleet]``). Faults become node statuses: a node
that dies mid-run is LOST, one that does not answer within the node limit TIMEOUT (its task cancelled), and a
stopped fleet run cancels every task (its doctor gets SIGTERM and stops its probes).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor import __version__
from gpudoctor.errors import GpuDoctorError
from gpudoctor.fleet.report import FleetReport, NodeRun, NodeStatus, analyse
from gpudoctor.model import Report
from gpudoctor.process.cancel import CancelScope
from gpudoctor.report.codec import decode

RAY_MISSING = 'gpudoctor fleet needs Ray, an optional extra: pip install "gpudoctor[fleet]"'
CONNECT_TIMEOUT_S = 15.0
_POLL_S = 0.2


@dataclass(frozen=True)
class FleetOptions:
    address: str | None = None  # None: the running cluster, as Ray resolves it (RAY_ADDRESS, then the local one)
    doctor_args: tuple[str, ...] = ()  # passed to the doctor on each node (--python, --only, --device, ...)
    node_timeout_s: float = 1800.0
    show_hosts: bool = False
    quiet: bool = False  # what Ray prints goes nowhere (the TUI draws on the terminal), not to stderr


NodeCallback = Callable[[NodeRun], None]


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise GpuDoctorError(RAY_MISSING) from None
    return ray


def _check_reachable(address: str) -> None:
    """A host:port address must accept a connection within CONNECT_TIMEOUT_S (Ray itself retries for minutes)."""
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", "local" or another form Ray resolves itself
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as error:
        raise GpuDoctorError(
            f"cannot reach the Ray cluster at {address}: {error.strerror or error}",
            hint="give the head's address as host:port (ray status shows it), or start a cluster with ray start --head",
        ) from None


@contextlib.contextmanager
def _staged_gpudoctor() -> Iterator[Path]:
    """This gpudoctor as one package folder with its probes and kernels inside (the wheel's layout), for Ray to
    ship to the nodes."""
    from gpudoctor.suite.catalog import default_kernel_dir, default_probe_dir

    package = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="gpudoctor-fleet-") as scratch:
        target = Path(scratch) / "gpudoctor"
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(package, target, ignore=ignore)
        for name, source in (("probes", default_probe_dir()), ("kernels", default_kernel_dir())):
            if not (target / "_data" / name).exists():
                shutil.copytree(source, target / "_data" / name, ignore=ignore)
        yield target


@contextlib.contextmanager
def _driver_output_off_stdout(quiet: bool) -> Iterator[None]:
    """Ray's driver prints what it hears from the cluster (a raylet that died, a worker's error) on standard
    output; while it runs, descriptor 1 is standard error (or /dev/null under the TUI), so the report on stdout
    stays one clean document."""
    sys.stdout.flush()
    saved = os.dup(1)
    target = os.open(os.devnull, os.O_WRONLY) if quiet else os.dup(2)
    try:
        os.dup2(target, 1)
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(target)


def _connect(ray: Any, address: str | None, package: Path) -> None:
    if address:
        _check_reachable(address)
    failure: list[BaseException] = []

    def init() -> None:
        # Ray asks sys.stdout and sys.stderr for their file descriptors; a TUI (or a test runner) may have put
        # objects without one in their place, so Ray sees the process's real streams while it starts.
        replaced = sys.stdout, sys.stderr
        sys.stdout = sys.__stdout__ or replaced[0]
        sys.stderr = sys.__stderr__ or replaced[1]
        try:
            ray.init(
                address=address or "auto",
                runtime_env={"py_modules": [str(package)]},
                log_to_driver=False,
                logging_level=logging.ERROR,
                configure_logging=True,
            )
        except BaseException as error:  # reported below, in the caller's thread
            failure.append(error)
        finally:
            sys.stdout, sys.stderr = replaced

    thread = threading.Thread(target=init, daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S + 15)
    if thread.is_alive():
        raise GpuDoctorError(f"the Ray cluster at {address or 'auto'} did not accept a connection in time")
    if failure:
        message = str(failure[0]).strip().splitlines()[0] if str(failure[0]).strip() else type(failure[0]).__name__
        raise GpuDoctorError(
            f"cannot connect to a Ray cluster ({address or 'the running one'}): {message}",
            hint="start one with `ray start --head`, or give --address host:port",
        )


_STOP_GRACE_S = 15.0  # a doctor past its node limit, between SIGTERM and SIGKILL: time to stop its probes
# Run as `python -c THIS -m gpudoctor ARGS`: ask for SIGTERM when the parent (the Ray worker) dies, leave if it is
# already gone, then become `python -m gpudoctor ARGS` (the request survives exec). No preexec_fn: the worker
# has threads.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "parent = os.getppid()\n"
    "ctypes.CDLL('libc.so.6', use_errno=True).prctl(1, signal.SIGTERM)\n"
    "if os.getppid() != parent: sys.exit(143)\n"
    "os.execv(sys.executable, [sys.executable] + sys.argv[1:])\n"
)


@contextlib.contextmanager
def ray_session(address: str | None, quiet: bool = False) -> Iterator[Any]:
    """Ray, connected to the cluster with this gpudoctor shipped to its nodes and Ray's own output kept off
    stdout; shut down on the way out, whatever happened. What `fleet` and `sweep --ray` both run in."""
    ray = _import_ray()
    with _staged_gpudoctor() as package, _driver_output_off_stdout(quiet):
        _connect(ray, address, package)
        try:
            yield ray
        finally:
            with contextlib.suppress(Exception):
                ray.shutdown()


def _examine_node(doctor_args: list[str], timeout_s: float) -> dict[str, Any]:
    """On the node: the doctor once for the CPU (and the inventory), then once per GPU with only that GPU
    visible. Each doctor is a process of its own that dies with this worker (so a cancelled task leaves no
    doctor behind: it gets SIGTERM and stops its probes)."""
    import subprocess
    import sys

    import gpudoctor

    root = os.path.dirname(os.path.dirname(os.path.abspath(gpudoctor.__file__)))
    base_env = dict(os.environ)
    base_env["PYTHONPATH"] = os.pathsep.join(p for p in (root, base_env.get("PYTHONPATH")) if p)

    def doctor(extra: list[str], env: dict[str, str]) -> dict[str, Any]:
        started = time.monotonic()
        # A session of its own (a kill of the worker's group must not take the doctor before it has stopped its
        # probes), and SIGTERM when this worker dies, set by the doctor's process itself before exec.
        process = subprocess.Popen(
            [sys.executable, "-c", _DIE_WITH_PARENT, "-m", "gpudoctor", *doctor_args, "--json", *extra],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            # SIGTERM first, as a user's Ctrl-C: the doctor stops its probes and removes its temporary folders;
            # SIGKILL (which leaves them) only if it has not ended after a grace.
            process.terminate()
            try:
                process.communicate(timeout=_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.communicate()
            return {"rc": None, "stdout": "", "stderr": f"no answer within {timeout_s:g} s", "seconds": timeout_s}
        return {"rc": process.returncode, "stdout": stdout, "stderr": stderr[-4000:],
                "seconds": time.monotonic() - started}  # fmt: skip

    if doctor_args[:1] == ["kernel"]:  # gpudoctor kernel runs the CPU and every visible GPU itself
        return {"host": socket.gethostname(), "gpus": [], "runs": [doctor([], base_env)]}
    device_given = "--device" in doctor_args
    runs = [doctor([] if device_given else ["--device", "cpu"], base_env)]
    # The node's GPUs: those Ray gave this task (it asked for all of the node's), else every GPU NVML lists
    # (a node whose raylet was not told of its GPUs).
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    if not visible:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            count = len(json.loads(runs[0]["stdout"])["environment"]["driver"]["gpus"])
            visible = [str(index) for index in range(count)]
    if not device_given and "--no-probes" not in doctor_args:
        for device in visible:
            runs.append(doctor(["--device", "cuda"], {**base_env, "CUDA_VISIBLE_DEVICES": device}))
    return {"host": socket.gethostname(), "gpus": visible, "runs": runs}


def _node_run(label: str, host: str | None, answer: dict[str, Any], seconds: float) -> NodeRun:
    reports: list[Report] = []
    for run in answer.get("runs", []):
        if run.get("rc") is None:
            return NodeRun(label, NodeStatus.TIMEOUT, tuple(reports), str(run.get("stderr")), host, seconds)
        try:
            reports.append(decode(json.loads(run["stdout"])))
        except (ValueError, KeyError, TypeError):
            said = (run.get("stderr") or "").strip().splitlines()
            reason = said[-1] if said else f"the doctor exited with status {run.get('rc')} and printed no report"
            return NodeRun(label, NodeStatus.FAILED, tuple(reports), reason, host, seconds)
    return NodeRun(label, NodeStatus.DONE, tuple(reports), "", host, seconds)


def run_fleet(
    options: FleetOptions, *, cancel: CancelScope | None = None, on_node: NodeCallback | None = None
) -> FleetReport:
    """The doctor on every alive node; results of nodes that answered are kept whatever happens to the others."""
    scope = cancel if cancel is not None else CancelScope()
    created = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat()
    with ray_session(options.address, options.quiet) as ray:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = [n for n in ray.nodes() if n.get("Alive")]
        alive.sort(key=lambda n: ("node:__internal_head__" not in n.get("Resources", {}), n["NodeID"]))
        if not alive:
            raise GpuDoctorError("the Ray cluster has no alive node")
        examine = ray.remote(num_cpus=0, max_retries=0)(_examine_node)
        started = time.monotonic()
        pending: dict[Any, tuple[str, str]] = {}
        for number, node in enumerate(alive, 1):
            host = f"{node.get('NodeManagerHostname')} ({node.get('NodeManagerAddress')})"
            strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
            gpus = int(node.get("Resources", {}).get("GPU", 0))
            # All of the node's GPUs, so Ray says which they are (CUDA_VISIBLE_DEVICES) and no job uses them
            # meanwhile; a node whose GPUs are busy waits for them, within the node limit.
            ref = examine.options(scheduling_strategy=strategy, num_gpus=gpus).remote(
                list(options.doctor_args), options.node_timeout_s
            )
            pending[ref] = (f"node {number}", host)
        done: dict[str, NodeRun] = {}
        deadline = started + options.node_timeout_s * 2 + 60  # each node runs one doctor, then one per GPU

        def finish(node: NodeRun) -> None:
            done[node.label] = node
            if on_node is not None:
                on_node(node)

        while pending:
            if scope.cancelled or time.monotonic() > deadline:
                status = NodeStatus.INTERRUPTED if scope.cancelled else NodeStatus.TIMEOUT
                why = scope.reason or "stopped" if scope.cancelled else "no answer in time; its task was cancelled"
                for ref, (label, where) in pending.items():
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
                    shown = where if options.show_hosts else None
                    finish(NodeRun(label, status, (), why, shown, time.monotonic() - started))
                break
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=_POLL_S)
            for ref in ready:
                label, where = pending.pop(ref)
                shown_host = where if options.show_hosts else None
                seconds = time.monotonic() - started
                try:
                    answer = ray.get(ref)
                except ray.exceptions.RayTaskError as error:
                    finish(NodeRun(label, NodeStatus.FAILED, (), str(error).splitlines()[0], shown_host, seconds))
                    continue
                except ray.exceptions.RayError as error:  # the node or its worker died
                    finish(NodeRun(label, NodeStatus.LOST, (), type(error).__name__, shown_host, seconds))
                    continue
                finish(_node_run(label, shown_host, answer, seconds))
        nodes = [done[f"node {n}"] for n in range(1, len(alive) + 1)]
    return analyse(nodes, created, __version__)
