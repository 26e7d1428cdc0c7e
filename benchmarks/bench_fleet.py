"""What `gpudoctor fleet` costs per node over a local run: the same doctor (`--only torch-env`) run locally and
through a real local Ray cluster of one or three nodes (raylets on this machine), medians of several runs.

Usage: python benchmarks/bench_fleet.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    completed = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    if completed.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed: {completed.stderr[-2000:]}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    from ray.cluster_utils import Cluster

    doctor = [sys.executable, "-m", "gpudoctor"]
    local = [wall([*doctor, "--json", "--only", "torch-env", "--device", "cpu"]) for _ in range(options.runs)]
    print(f"local doctor (--only torch-env --device cpu): median {statistics.median(local):.2f} s")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        for nodes in (1, 3):
            while len(cluster.list_all_nodes()) < nodes:
                cluster.add_node(num_cpus=1)
            argv = [*doctor, "fleet", "--address", cluster.address, "--only", "torch-env", "--json"]
            samples = [wall(argv) for _ in range(options.runs)]
            median = statistics.median(samples)
            print(
                f"fleet over {nodes} node(s): median {median:.2f} s ({', '.join(f'{s:.2f}' for s in samples)}); "
                f"overhead over the local run {median - statistics.median(local):.2f} s"
            )
    finally:
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
