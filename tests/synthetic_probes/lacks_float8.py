"""Fails as MAX's torch bridge fails with a torch that lacks float8_e8m0fnu (torch < 2.7), unless the doctor applied
the float8 patch; notes when its process ran, so that a test sees how many probes ran at once."""

import os
import time

STARTED = time.time()  # before torch is imported: the span is (nearly) the process's own

import _use_harness  # noqa: E402, F401
import torch  # noqa: E402

if hasattr(torch, "float8_e8m0fnu"):
    del torch.float8_e8m0fnu  # as torch 2.6 lacks it; the harness applies a patch only after this

from _harness import run_probe  # noqa: E402


def main(ctx):
    try:
        ctx.step("look up torch.float8_e8m0fnu")
        dtype = torch.float8_e8m0fnu  # AttributeError: module 'torch' has no attribute 'float8_e8m0fnu'
        time.sleep(2.0)  # with the patch: long enough that reruns side by side overlap
        return f"torch.float8_e8m0fnu is there ({dtype})"
    finally:
        spans = os.environ.get("GPUDOCTOR_TEST_SPANS")
        if spans:
            patched = "patched" if os.environ.get("GPUDOCTOR_PATCH_FILES") else "as-is"
            with open(os.path.join(spans, f"{os.getpid()}.span"), "w") as handle:
                handle.write(f"{patched} {STARTED!r} {time.time()!r}\n")


run_probe("lacks-float8", main)
