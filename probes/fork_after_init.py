"""Probe fork-after-init: initialise CUDA, fork, and see what CUDA calls in the child do — a clean
error, a hang or a crash — so users know whether multiprocessing's fork start method is safe here.

Run by hand: python probes/fork_after_init.py --device cuda
"""

import os
import signal
import time

from _harness import run_probe

CHILD_LIMIT_S = 20.0


def _in_child(function):
    """Run ``function`` in a forked child; return ('ok'|'error'|'crash'|'hang', text)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into the parent's code
        os.close(read_end)
        try:
            message = "ok " + str(function())
        except BaseException as error:
            message = "error %s: %s" % (type(error).__name__, error)
        os.write(write_end, message.encode("utf-8", "replace")[:4000])
        os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + CHILD_LIMIT_S
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_end)
            return "hang", "no answer within %g s" % CHILD_LIMIT_S
        time.sleep(0.05)
    text = os.read(read_end, 4096).decode("utf-8", "replace")
    os.close(read_end)
    if os.WIFSIGNALED(status):
        return "crash", signal.Signals(os.WTERMSIG(status)).name
    kind, _, detail = text.partition(" ")
    return (kind or "error"), (detail or "exited with status %d" % os.WEXITSTATUS(status))


def _torch_call():
    import torch

    return (torch.ones(2, device="cuda") * 2).sum().item()


def _driver_call():
    import ctypes

    libcuda = ctypes.CDLL("libcuda.so.1")
    pointer = ctypes.c_uint64(0)
    result = libcuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(1024))
    if result != 0:
        raise RuntimeError("cuMemAlloc returned CUresult %d" % result)
    return "cuMemAlloc succeeded"


def main(ctx):
    ctx.step("import torch and initialise CUDA in the parent")
    import torch

    ctx.check(torch.cuda.is_available(), "torch.cuda.is_available() is False")
    value = (torch.ones(2, device="cuda") * 2).sum().item()
    ctx.check(value == 4.0, "parent CUDA op computed %r" % value)
    ctx.step("fork, then a torch CUDA op in the child")
    torch_kind, torch_text = _in_child(_torch_call)
    ctx.detail("child_torch", "%s: %s" % (torch_kind, torch_text))
    ctx.step("fork, then a raw driver call (cuMemAlloc) in the child")
    driver_kind, driver_text = _in_child(_driver_call)
    ctx.detail("child_driver", "%s: %s" % (driver_kind, driver_text))
    ctx.detail("fork_start_method_safe", torch_kind == "ok" and driver_kind == "ok")
    dangerous = [(what, kind, text) for what, kind, text in
                 (("torch", torch_kind, torch_text), ("driver", driver_kind, driver_text))
                 if kind in ("crash", "hang")]
    ctx.check(not dangerous, "after fork, CUDA in the child " + "; ".join(
        "%s call: %s (%s)" % (what, kind, text) for what, kind, text in dangerous)
        + ": use the 'spawn' start method (multiprocessing.set_start_method('spawn')) once CUDA is initialised")
    return "after CUDA init, a forked child's torch call gives %s (%s); a raw driver call gives %s (%s)" % (
        torch_kind, torch_text[:120], driver_kind, driver_text[:120])

run_probe("fork-after-init", main, devices=("cuda",))
