"""`gpudoctor sweep --ray`: the sweep's cells spread over a Ray cluster's nodes, one task per cell.

Each task builds the cell's environment and runs the doctor on its node (the same code as a local cell: the
probes are processes of their own there), and sends back the cell's result and report; the matrix rows are
merged here, on the driver, through the same locked store as a local sweep. Ray only in this room.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from typing import Any

from gpudoctor.atomic import atomic_write
from gpudoctor.fleet.ray_runner import ray_session
from gpudoctor.process.cancel import CancelScope
from gpudoctor.report.codec import decode
from gpudoctor.sweep.grid import CellResult, CellStatus
from gpudoctor.sweep.run import EventCallback, Grid, Sweep, SweepEvent, SweepOptions

_POLL_S = 0.2


def _examine_cell(options: SweepOptions, cell: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """On a node: the cell as a local sweep examines it (no matrix there), and its report."""
    result = Sweep(options).examine(cell, CancelScope(), None)
    report = None
    if result.report is not None:
        report = json.loads((options.envs_dir / result.report).read_text(encoding="utf-8"))
    return result.to_dict(), report


def sweep_on_ray(
    options: SweepOptions,
    address: str | None,
    *,
    on_event: EventCallback | None = None,
    cancel: CancelScope | None = None,
) -> Grid:
    scope = cancel if cancel is not None else CancelScope()
    local = Sweep(options)  # merges rows into this machine's matrix
    node_options = dataclasses.replace(options, matrix_dir=None, parallel=1)
    results: dict[Any, CellResult] = {}

    def done(cell: Any, result: CellResult) -> None:
        results[cell] = result
        if on_event is not None:
            on_event(SweepEvent(cell, "done", result))

    with ray_session(address) as ray:
        remote = ray.remote(num_cpus=1, max_retries=0)(_examine_cell)
        pending = {
            remote.options(scheduling_strategy="SPREAD").remote(node_options, cell): (cell, time.monotonic())
            for cell in options.cells
        }
        while pending:
            if scope.cancelled:
                for ref, (cell, _) in pending.items():
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
                    done(cell, CellResult(cell, CellStatus.INTERRUPTED, f"not finished: {scope.reason}"))
                break
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=_POLL_S)
            for ref in ready:
                cell, started = pending.pop(ref)
                try:
                    result_data, report_data = ray.get(ref)
                except ray.exceptions.RayError as error:
                    reason = f"the node examining it was lost ({type(error).__name__})"
                    done(cell, CellResult(cell, CellStatus.LOST, reason, duration_s=time.monotonic() - started))
                    continue
                result = CellResult.from_dict(result_data)
                if report_data is not None and result.report is not None:
                    # kept here too, where a local sweep keeps it (a bisect reads it back; a rerun reuses it)
                    atomic_write(options.envs_dir / result.report, json.dumps(report_data, indent=2) + "\n")
                    local.record(cell, result, decode(report_data))
                done(cell, result)
    return Grid(tuple(results[c] for c in options.cells), interrupted=scope.cancelled)
