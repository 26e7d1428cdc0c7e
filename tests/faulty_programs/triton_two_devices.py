# Needs 2 GPUs. The model's weights moved to cuda:1 (model.to("cuda:1")), the batch left on cuda:0, and a Triton
# kernel launched with both: Triton launches on the current device (cuda:0) and its launcher says "Pointer argument
# (at 1) cannot be accessed from Triton (cpu tensor?)" although no tensor is on the CPU. Before the launch, the call
# checks (issue 50) name `w_ptr` on cuda:1 beside `x_ptr` on cuda:0. The second launch, every tensor on cuda:1 while
# the current device is still cuda:0, ran without an error on two H200s (Triton 3.6): no mistake is named there.
import torch
import triton
import triton.language as tl


@triton.jit
def scale_rows(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * tl.load(w_ptr + offs, mask=mask), mask=mask)


model = torch.nn.Linear(4096, 1, bias=False).to("cuda:1")  # moved to the second GPU
batch = torch.randn(4096, device="cuda:0")  # still on the first
weights = model.weight.detach().view(-1)
out = torch.empty_like(batch)
n = batch.numel()
try:
    scale_rows[(triton.cdiv(n, 1024),)](batch, weights, out, n, BLOCK=1024)
except ValueError as error:
    print("first launch:", error)
batch = batch.to("cuda:1")
out = torch.empty_like(batch)
scale_rows[(triton.cdiv(n, 1024),)](batch, weights, out, n, BLOCK=1024)
torch.cuda.synchronize()
print("scaled", n)
