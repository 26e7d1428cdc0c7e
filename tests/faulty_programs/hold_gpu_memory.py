# Not a faulty program: the other process for oom_other_process.py. Holds GIB GiB of GPU memory for SECONDS seconds,
# as someone else's job on a shared GPU does; prints its pid and "holding" once the memory is taken.
#   python3 tests/faulty_programs/hold_gpu_memory.py GIB SECONDS
import os
import sys
import time

import torch

gib, seconds = float(sys.argv[1]), float(sys.argv[2])
block = torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print(f"pid {os.getpid()} holding {gib:.1f} GiB for {seconds:.0f} s", flush=True)
time.sleep(seconds)
