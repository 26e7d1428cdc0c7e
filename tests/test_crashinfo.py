"""Parsing of what dead processes leave behind: signal names, faulthandler dumps, tracebacks, and the rules every
run's ending shares (classify_ending)."""

from pathlib import Path

from gpudoctor.model import Outcome
from gpudoctor.process.endings import (
    LAST_LINE_LIMIT,
    classify_ending,
    fatal_error,
    faulthandler_frames,
    signal_name,
    traceback_tail,
)

# Shaped like seed 000's log: the crash in a worker thread of MAX while the main thread waits.
SEED_000_DUMP = """\
[probe] execute op
Fatal Python error: Segmentation fault

Thread 0x00007f3a2effd640 (most recent call first):
  File "/venv/lib/python3.12/site-packages/max/engine/api.py", line 125 in _Model_execute
  File "/usr/lib/python3.12/concurrent/futures/thread.py", line 58 in run
  File "/usr/lib/python3.12/concurrent/futures/thread.py", line 83 in _worker

Current thread 0x00007f3b6c9f1740 (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 355 in wait
  File "/venv/lib/python3.12/site-packages/max/torch/torch.py", line 310 in __call__
  File "/work/repro.py", line 40 in <module>

Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)
"""


def test_signal_names() -> None:
    assert signal_name(11) == "SIGSEGV"
    assert signal_name(6) == "SIGABRT"
    assert signal_name(7) == "SIGBUS"
    assert signal_name(4) == "SIGILL"
    assert signal_name(8) == "SIGFPE"
    assert signal_name(250) == "signal 250"


def test_faulthandler_frames_keep_every_thread_innermost_first() -> None:
    frames = faulthandler_frames(SEED_000_DUMP)
    assert [(f.thread, f.function) for f in frames] == [
        ("0x00007f3a2effd640", "_Model_execute"),
        ("0x00007f3a2effd640", "run"),
        ("0x00007f3a2effd640", "_worker"),
        ("current", "wait"),
        ("current", "__call__"),
        ("current", "<module>"),
    ]
    assert frames[0].file.endswith("max/engine/api.py") and frames[0].line == 125
    assert fatal_error(SEED_000_DUMP) == "Segmentation fault"


def test_only_the_last_dump_counts_and_unknown_lines_are_kept_as_none() -> None:
    text = (
        SEED_000_DUMP
        + 'Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n  File "x.py", line ??? in f\n'
    )
    frames = faulthandler_frames(text)
    assert [(f.file, f.line, f.function) for f in frames] == [("x.py", None, "f")]


def test_requested_dump_without_headline_is_parsed() -> None:
    text = 'Current thread 0x00007f (most recent call first):\n  File "/p/hangs.py", line 9 in wait_for_device\n'
    assert [f.function for f in faulthandler_frames(text)] == ["wait_for_device"]
    assert fatal_error(text) is None


def test_no_dump_no_frames() -> None:
    assert faulthandler_frames("just some output\n") == ()


def test_traceback_tail() -> None:
    text = """noise
Traceback (most recent call last):
  File "/p/probe.py", line 3, in <module>
    import max.torch
  File "/site/max/torch/__init__.py", line 20, in <module>
    torch.float8_e8m0fnu: DType.float8_e8m0fnu,
AttributeError: module 'torch' has no attribute 'float8_e8m0fnu'
"""
    exc_type, message, frames = traceback_tail(text)
    assert exc_type == "AttributeError"
    assert message == "module 'torch' has no attribute 'float8_e8m0fnu'"
    assert [f.file for f in frames] == ["/site/max/torch/__init__.py", "/p/probe.py"]
    assert traceback_tail("nothing here") == (None, None, ())


def test_a_death_by_signal_is_a_crash_with_its_headline_and_every_threads_frames() -> None:
    ending = classify_ending(-11, False, SEED_000_DUMP)
    assert ending.outcome is Outcome.CRASH and ending.signal == "SIGSEGV" and ending.headline == "Segmentation fault"
    assert {f.thread for f in ending.dumped} == {"0x00007f3a2effd640", "current"}
    assert ending.killed("during 'execute op'") == "killed by SIGSEGV during 'execute op' (Segmentation fault)"
    assert ending.killed("", "SIGABRT") == "killed by SIGABRT (Segmentation fault)"
    assert classify_ending(-9, False, "").killed() == "killed by SIGKILL"


def test_a_timeout_wins_over_the_status_and_keeps_the_dump() -> None:
    ending = classify_ending(-6, True, SEED_000_DUMP)
    assert ending.outcome is Outcome.TIMEOUT and len(ending.dumped) == 6


def test_an_exit_says_the_exception_or_else_the_last_line_cut_short() -> None:
    raised = classify_ending(1, False, 'Traceback (most recent call last):\n  File "/w/x.py", line 3, in <module>\n'
                             "RuntimeError: wrong result\n")  # fmt: skip
    assert raised.outcome is Outcome.FAIL and raised.exception_type == "RuntimeError"
    assert raised.exited() == "exited with status 1: RuntimeError: wrong result"
    assert [(f.file, f.line, f.function) for f in raised.traceback] == [("/w/x.py", 3, "<module>")]
    said = classify_ending(3, False, "first\n" + "x" * 1000 + "\n\n  \n")
    assert said.last_line == "x" * LAST_LINE_LIMIT
    assert said.exited(" without a result") == f"exited with status 3 without a result: {said.last_line}"
    assert classify_ending(2, False, "").exited() == "exited with status 2"
    assert classify_ending(0, False, "").outcome is Outcome.PASS


def test_frames_are_redacted() -> None:
    home = str(Path.home())
    thread = "Current thread 0x1 (most recent call first):"
    dump = f'Fatal Python error: Aborted\n\n{thread}\n  File "{home}/r.py", line 1 in f\n'
    (frame,) = classify_ending(-6, False, dump).dumped
    assert frame.file == "~/r.py" and frame.thread == "current"
