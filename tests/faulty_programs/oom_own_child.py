# The program starts its own data-prefetching child (multiprocessing, spawn), which caches a dataset on the GPU sized
# as 70% of its memory and keeps it; the parent then sizes its activation buffer as 40% of the GPU's memory:
# torch.OutOfMemoryError in the parent, caused by its own child's allocation (nothing outside the program). The
# child is not a daemon: after the traceback the parent waits for it (~20 s) before it exits, the child's memory
# still held.
import multiprocessing as mp
import time

import torch


def prefetch(ready):
    total = torch.cuda.get_device_properties(0).total_memory
    cache = torch.empty(int(0.7 * total), dtype=torch.uint8, device="cuda")
    cache.fill_(1)
    torch.cuda.synchronize()
    ready.set()
    time.sleep(20)  # keeps the cache while the parent trains


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    worker = ctx.Process(target=prefetch, args=(ready,))
    worker.start()
    ready.wait(120)
    total = torch.cuda.get_device_properties(0).total_memory
    activations = torch.empty(int(0.4 * total), dtype=torch.uint8, device="cuda")
    print("activations ready:", activations.numel() / 2**30, "GiB")
