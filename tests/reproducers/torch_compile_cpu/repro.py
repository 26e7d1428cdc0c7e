"""torch.compile of a small function on the CPU (scripts/bisect_package_triton.py bisects Triton under torch 2.6 with
it): torch 2.6's Inductor imports Triton's AttrsDescriptor whenever Triton is installed, and Triton 3.3 removed it, so
with Triton 3.3 or later this fails with "cannot import name 'AttrsDescriptor'" before anything runs on a GPU."""

import torch


def scaled_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * 2 + y).sin().sum(dim=-1)


x, y = torch.randn(4, 8), torch.randn(4, 8)
compiled = torch.compile(scaled_sum)
torch.testing.assert_close(compiled(x, y), scaled_sum(x, y))
print("torch", torch.__version__, "compiled on the CPU: ok")
