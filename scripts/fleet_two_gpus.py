"""Record `gpudoctor fleet` on one host with two GPUs (the GPU machine's two-GPU kind), two ways, for docs/fleet.md
and the test fixtures: one raylet told of both GPUs, then one raylet per GPU where the second raylet's environment
differs (a file of the user's named torch.py first on its PYTHONPATH) — the odd one out.

Usage: python scripts/fleet_two_gpus.py OUT_DIR [gpudoctor fleet options, e.g. --only torch-env]
Needs Ray (pip install "gpudoctor[fleet]") and a machine with two GPUs; each report is OUT_DIR/<way>.json.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ray.cluster_utils import Cluster


def fleet(address: str, out: Path, options: list[str]) -> int:
    argv = [sys.executable, "-m", "gpudoctor", "fleet", "--address", address, "--json", *options]
    completed = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    out.write_text(completed.stdout)
    out.with_suffix(".err").write_text(completed.stderr[-20000:])
    return completed.returncode


def main() -> int:
    out, options = Path(sys.argv[1]), sys.argv[2:]
    out.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 8, "num_gpus": 2})
    try:
        print("one raylet, both GPUs: exit", fleet(cluster.address, out / "one-raylet-two-gpus.json", options))
    finally:
        cluster.shutdown()
    shadow = Path(tempfile.mkdtemp(prefix="shadow-"))
    (shadow / "torch.py").write_text("raise ImportError('a file of mine named torch.py')\n")
    path = os.environ.get("PYTHONPATH", "")
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 4, "num_gpus": 1, "env_vars": {"CUDA_VISIBLE_DEVICES": "0"}},
    )
    try:
        cluster.add_node(
            num_cpus=4, num_gpus=1,
            env_vars={"CUDA_VISIBLE_DEVICES": "1", "PYTHONPATH": os.pathsep.join(p for p in (str(shadow), path) if p)},
        )  # fmt: skip
        cluster.wait_for_nodes()
        code = fleet(cluster.address, out / "raylet-per-gpu.json", options)
        print("a raylet per GPU, the second shadowed: exit", code)
    finally:
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
