"""Two ranks under torch.multiprocessing.spawn: rank 1 dies of SIGSEGV in its own code (a read of address 0 through
ctypes) after the first all_reduce, so mp.spawn's join in the parent raises ProcessExitedException; ``--abort``
makes it die of SIGABRT (os.abort) instead."""

from __future__ import annotations

import ctypes
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _ranks import free_port, join


def load_shard(rank: int, abort: bool) -> None:
    if rank == 1:
        if abort:
            os.abort()
        ctypes.string_at(0)  # rank 1 dies here


def train(rank: int, world_size: int, backend: str, port: int, pids: str | None, abort: bool) -> None:
    device = join(rank, world_size, backend, port, pids)
    dist.all_reduce(torch.ones(4, device=device))
    load_shard(rank, abort)
    dist.all_reduce(torch.ones(4, device=device))  # rank 0 waits here until mp.spawn ends it
    dist.destroy_process_group()


if __name__ == "__main__":
    abort = "--abort" in sys.argv
    sys.argv = [a for a in sys.argv if a != "--abort"]
    from _ranks import arguments

    args = arguments()
    mp.spawn(train, args=(args.world_size, args.backend, free_port(), args.pids, abort), nprocs=args.world_size)
