"""Parsing of what dead processes leave behind: signal names, faulthandler dumps, tracebacks."""

from gpudoctor.process.endings import fatal_error, faulthandler_frames, signal_name, traceback_tail

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
