"""The small harness every probe script uses: argument parsing, steps, and the structured result.

Probes stay standalone scripts (``python probes/<name>.py --device cuda``); this file sits beside them
and needs nothing but the standard library, so a probe runs in any interpreter the doctor examines,
whether or not gpudoctor is installed there. Kept compatible with Python 3.8.

The result goes through a side channel, never stdout: when the runner sets GPUDOCTOR_RESULT_FILE,
each step and the final result are appended to that file as JSON lines, flushed as they happen, so a
probe that segfaults mid-way still tells the runner which step it was in. What those lines hold is the
protocol in ``_protocol.py`` (a copy of ``gpudoctor.protocol``, which the runner reads them with).
"""

import argparse
import faulthandler
import os
import signal
import sys
import time
import traceback

from _protocol import (
    EVENT_RESULT,
    PATCH_FILES_ENV,
    RESULT_FILE_ENV,
    SHUTDOWN_STEP,
    STATUS_FAIL,
    STATUS_PASS,
    STATUS_SKIP,
    DetailKey,
    encode,
    step_event,
)


class Skip(Exception):
    """Raise to report that the probe cannot run here (and why); not a failure."""


class CheckFailed(Exception):
    """Raise when the stack ran but produced a wrong answer."""


class Context(object):
    """What a probe function receives: its device, its options, and a way to record steps and facts."""

    def __init__(self, name, device, options, channel):
        self.name = name
        self.device = device
        self.options = options
        self.details = {}
        self._channel = channel

    def step(self, description):
        """Record what the probe is about to do, so a crash in it can be located."""
        sys.stderr.write("[%s] %s\n" % (self.name, description))
        sys.stderr.flush()
        self._emit(step_event(description))

    def detail(self, key, value):
        """Record a fact worth reporting (a version, which API exists, a measured value)."""
        self.details[key] = value

    def skip(self, reason):
        raise Skip(reason)

    def check(self, condition, message):
        if not condition:
            raise CheckFailed(message)

    def _emit(self, event):
        if self._channel is not None:
            self._channel.write(encode(event))
            self._channel.flush()


def _open_channel():
    path = os.environ.get(RESULT_FILE_ENV)
    if not path:
        return None
    return open(path, "a", encoding="utf-8")


def run_probe(name, function, devices=("cpu", "cuda"), add_arguments=None):
    """Parse the command line, run ``function(ctx)`` and report; never returns."""
    parser = argparse.ArgumentParser(prog=name, description="gpudoctor probe %s" % name)
    if devices:
        parser.add_argument("--device", choices=list(devices), default=devices[0])
    if add_arguments is not None:
        add_arguments(parser)
    options = parser.parse_args()
    _die_with_runner()
    if hasattr(signal, "SIGUSR1"):
        # The runner sends SIGUSR1 before killing a probe that timed out: dump where every thread hangs.
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    device = getattr(options, "device", None)
    label = name if device is None else "%s/%s" % (name, device)
    channel = _open_channel()
    ctx = Context(label, device, options, channel)
    result = {"event": EVENT_RESULT}
    try:
        _apply_patches(ctx)
        summary = function(ctx)
        result.update(status=STATUS_PASS, summary=summary or "ok")
        exit_code = 0
    except Skip as skip:
        result.update(status=STATUS_SKIP, summary=str(skip), skip_reason=str(skip))
        exit_code = 0
    except BaseException as error:  # the probe reports every failure, even SystemExit from a library
        result.update(
            status=STATUS_FAIL,
            summary="%s: %s" % (type(error).__name__, error),
            exception_type=_qualified_name(type(error)),
            message=str(error),
            traceback=traceback.format_exc(),
        )
        traceback.print_exc()
        exit_code = 1
    result["details"] = ctx.details
    result["t"] = time.monotonic()  # when the probe's own work ended (the runner times its last step by it)
    ctx._emit(result)
    sys.stdout.write("%s %s: %s\n" % (result["status"].upper(), label, result["summary"]))
    sys.stdout.flush()
    # Leaving normally on purpose: a stack that crashes during interpreter teardown (atexit handlers,
    # driver unload) is a finding too, and the runner reports it as a crash after the result.
    ctx._emit(step_event(SHUTDOWN_STEP))
    if channel is not None:
        channel.close()
    sys.exit(exit_code)


def _die_with_runner():
    """Under the doctor's runner on Linux: be killed if the doctor dies, whatever kills it (a SIGKILL, or Ray
    killing the children of a worker it stops), so no probe outlives the run that started it."""
    if not os.environ.get(RESULT_FILE_ENV) or not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # no prctl here: the runner's own kill of the process group still applies
        return
    if os.getppid() == 1:  # the doctor died before the request was made
        os._exit(1)


def _apply_patches(ctx):
    import runpy

    for path in filter(None, os.environ.get(PATCH_FILES_ENV, "").split(os.pathsep)):
        ctx.step("apply patch %s" % os.path.basename(path))
        runpy.run_path(path, run_name="gpudoctor_patch")
        ctx.details.setdefault(DetailKey.PATCHES_APPLIED, []).append(os.path.basename(path))


def _qualified_name(cls):
    module = getattr(cls, "__module__", "")
    if module in ("builtins", "__main__", ""):
        return cls.__name__
    return "%s.%s" % (module, cls.__qualname__)
