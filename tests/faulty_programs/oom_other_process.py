# A serving script sizes its KV cache as half of the GPU's total memory (as gpu_memory_utilization settings do),
# but another process (another user's job; the recording starts hold_gpu_memory.py first) already holds most of the
# GPU: torch.OutOfMemoryError, whose message names the other process's memory, not this program's.
import torch

props = torch.cuda.get_device_properties(0)
weights = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
cache_bytes = props.total_memory // 2
kv_cache = torch.empty(cache_bytes // 2, dtype=torch.float16, device="cuda")
print(f"KV cache of {cache_bytes / 2**30:.1f} GiB ready on {props.name}")
