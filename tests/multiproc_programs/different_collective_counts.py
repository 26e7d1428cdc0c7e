"""Two ranks under torch.multiprocessing.spawn that issue different collectives: rank 0 reduces its gradients three
times, rank 1 only twice (it skips the last step) and goes on to the barrier before saving, so rank 0 waits in its
third all_reduce while rank 1 waits in barrier."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from _ranks import arguments, free_port, join


def train(rank: int, world_size: int, backend: str, port: int, pids: str | None) -> None:
    device = join(rank, world_size, backend, port, pids)
    steps = 3 if rank == 0 else 2  # rank 1's last batch was dropped
    for _ in range(steps):
        grad = torch.ones(1024, device=device)
        dist.all_reduce(grad)  # rank 0's third call waits here
    dist.barrier()  # rank 1 waits here
    dist.destroy_process_group()


if __name__ == "__main__":
    args = arguments()
    mp.spawn(train, args=(args.world_size, args.backend, free_port(), args.pids), nprocs=args.world_size)
