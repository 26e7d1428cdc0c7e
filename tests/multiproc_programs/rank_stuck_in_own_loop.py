"""Two ranks under torch.multiprocessing.spawn: rank 1 never reaches the all_reduce (it spins in its own loop, waiting
for a file nobody writes), so rank 0 waits in all_reduce for it, forever."""

from __future__ import annotations

import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _ranks import arguments, free_port, join


def wait_for_data(path: str) -> None:
    while not os.path.exists(path):
        time.sleep(0.05)  # rank 1 spins here


def train(rank: int, world_size: int, backend: str, port: int, pids: str | None) -> None:
    device = join(rank, world_size, backend, port, pids)
    if rank == 1:
        wait_for_data("/nonexistent/shard-1.bin")
    total = torch.ones(4, device=device)
    dist.all_reduce(total)  # rank 0 waits here
    dist.destroy_process_group()


if __name__ == "__main__":
    args = arguments()
    mp.spawn(train, args=(args.world_size, args.backend, free_port(), args.pids), nprocs=args.world_size)
