"""What the two-rank programs share: the backend from ``--backend`` (gloo on the CPU, nccl on two GPUs), a
rendezvous on a free local port, and a file (``--pids FILE``) where each rank writes "rank pid" as it starts."""

from __future__ import annotations

import argparse
import os
import socket

import torch
import torch.distributed as dist


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    parser.add_argument("--pids", default=None, help="a file each rank writes 'rank pid' to")
    parser.add_argument("--world-size", type=int, default=2)
    return parser.parse_args()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def join(rank: int, world_size: int, backend: str, port: int, pids: str | None) -> torch.device:
    """This rank in the group; its device (cuda:rank for nccl)."""
    if pids is not None:
        with open(pids, "a") as out:
            out.write(f"{rank} {os.getpid()}\n")
    device = torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size)
    return device
