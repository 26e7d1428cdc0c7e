"""The reference for MAX's grayscale examples: 0.21 R + 0.71 G + 0.07 B in float32, clamped to 0..255, truncated to
uint8, with the rounding the Mojo compiler gives it.

Mojo contracts `0.21 * r + 0.71 * g` into one fused multiply-add (rounded once), so the kernel's float32 sum is not
torch's `0.21 * r + 0.71 * g + 0.07 * b` (rounded after each operation): where the exact value is a whole number,
e.g. the pixel (10, 5, 5) = 6.0, torch gets 5.9999995 and truncates to 5 while the kernel gets 6.0 and writes 6 (8 of
4096 pixels of gpudoctor's random image). Integer outputs are compared exactly, so the reference reproduces the
contraction: fma(0.21, r, 0.71 * g) is exact in float64 (a float32 times a byte, plus a float32 of the same
magnitude), then rounded to float32 once.
"""

from __future__ import annotations

import torch


def grayscale(image: torch.Tensor) -> torch.Tensor:
    r, g, b = (image[..., channel].to(torch.float32) for channel in range(3))
    c_r, c_g, c_b = (torch.tensor(c, dtype=torch.float32) for c in (0.21, 0.71, 0.07))
    fused = (c_r.double() * r.double() + (c_g * g).double()).to(torch.float32)
    return (fused + c_b * b).clamp(0, 255).to(torch.uint8)
