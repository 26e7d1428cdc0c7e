"""Triage of a failed run: from how it ended (exit status, signal, deadline), its text and the program's own source,
the class of failure — and, in one table, the experiments each class gets. The way a run fails decides what can
explain it: a memory fault is located by a synchronous rerun and memcheck, a wrong result in a program that launched
its own kernels by racecheck, synccheck, initcheck and memcheck, a hang only where it hangs (never rerun to hang
again), a host crash by native frames and memcheck (clean with a host signal: the host crashed), a forked worker by
the text and gpudoctor's fork probe, an import by the knowledge and the lookup. Pure: it reads a ProbeResult and text.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from gpudoctor.instruments.reruns import Instrument
from gpudoctor.model import Outcome, ProbeResult


class FailureClass(enum.StrEnum):
    MEMORY_FAULT = "memory-fault"  # an illegal or misaligned access, a launch failure, a device-side assert
    LAUNCH_REFUSED = "launch-refused"  # the driver refused a launch (threads, shared memory, an argument)
    WRONG_RESULT = "wrong-result"  # the program's own check of what its kernels computed failed
    HANG = "hang"  # no end before the deadline
    HOST_CRASH = "host-crash"  # a fatal signal with no GPU fault in the text
    PROCESS_MODEL = "process-model"  # CUDA used across a fork
    BEFORE_CUDA = "before-cuda"  # an import, an API that moved, a build: the program failed before using CUDA
    PYTHON_ERROR = "python-error"  # a Python exception whose words say nothing of CUDA or a GPU
    OUT_OF_MEMORY = "out-of-memory"  # an allocation the GPU could not give: what was asked, free, and who holds it
    NO_BINARY = "no-binary"  # no kernel image for this GPU's arch: whose binary, built for which arch
    OTHER = "other"  # a failure with CUDA's words that none of the above explains
    PASSED = "passed"  # exited 0: examined only with `run --sanitize`


# The one table from class to experiments (in the order they run). A hang is examined in place at its deadline
# (every thread's stack, native frames, the GPU's running kernels), a process-model failure by gpudoctor's fork
# probe beside it, an import by the knowledge: none of them is rerun.
EXPERIMENTS: Mapping[FailureClass, tuple[Instrument, ...]] = {
    FailureClass.MEMORY_FAULT: (Instrument.SYNCHRONOUS, Instrument.MEMCHECK),
    FailureClass.LAUNCH_REFUSED: (Instrument.SYNCHRONOUS, Instrument.MEMCHECK),
    # first: is it right when every launch waits? (then the GPU's work is not ordered before what reads it)
    FailureClass.WRONG_RESULT: (
        Instrument.SYNCHRONOUS,
        Instrument.RACECHECK,
        Instrument.SYNCCHECK,
        Instrument.INITCHECK,
        Instrument.MEMCHECK,
    ),
    FailureClass.HANG: (),
    FailureClass.HOST_CRASH: (Instrument.MEMCHECK,),
    FailureClass.PROCESS_MODEL: (),
    FailureClass.BEFORE_CUDA: (),
    FailureClass.PYTHON_ERROR: (),
    FailureClass.OUT_OF_MEMORY: (),  # NVML's processes, watched while it ran, say who holds the memory
    FailureClass.NO_BINARY: (),  # the arch each binary was built for is read from the program and its files
    FailureClass.OTHER: (Instrument.SYNCHRONOUS, Instrument.MEMCHECK),
    FailureClass.PASSED: (Instrument.MEMCHECK, Instrument.INITCHECK),
}

# Classes whose wrong results torch's stream sanitizer can explain, in a program that uses torch on the GPU.
_TORCH_STREAMS_FOR = frozenset({FailureClass.WRONG_RESULT, FailureClass.PASSED})


def experiments(failure: FailureClass, sources: Iterable[str] = ()) -> tuple[Instrument, ...]:
    """The class's experiments (EXPERIMENTS), and torch's stream sanitizer after them for a torch program whose
    result is in question (a failed check, or `run --sanitize` on one that passed)."""
    wanted = EXPERIMENTS[failure]
    texts = list(sources)
    if failure is FailureClass.WRONG_RESULT and not launches_own_kernels(texts):
        # a torch program's own tensors, no kernel of its own: compute-sanitizer's tools would watch torch's kernels
        # (racecheck alone ran 120 s on one, finding nothing); whether it is right when launches wait decides
        wanted = (Instrument.SYNCHRONOUS,)
    if failure in _TORCH_STREAMS_FOR and any(_TORCH_PROGRAM.search(text) for text in texts):
        wanted = (*wanted, Instrument.TORCH_STREAMS)
    return wanted


# What the class is read from, in order: the first that matches wins.
_FORK = re.compile(r"Cannot re-initialize CUDA in forked subprocess")
_FORKED_INIT = re.compile(r"cudaErrorInitializationError|CUDA_ERROR_NOT_INITIALIZED|initialization error")
_FORKED = re.compile(r"multiprocessing[/\\.]|\bfork\b|ForkProcess|PoolWorker")
_MEMORY = re.compile(
    r"illegal memory access|CUDA_ERROR_ILLEGAL_ADDRESS|cudaErrorIllegalAddress|misaligned address|"
    r"CUDA_ERROR_MISALIGNED_ADDRESS|cudaErrorMisalignedAddress|unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED|"
    r"cudaErrorLaunchFailure|device-side assert|CUDA_ERROR_ASSERT|cudaErrorAssert|illegal instruction|"
    r"CUDA_ERROR_ILLEGAL_INSTRUCTION|CUDA_ERROR_INVALID_ADDRESS_SPACE|CUDA_ERROR_INVALID_PC|"
    r"CUDA_ERROR_HARDWARE_STACK_ERROR"
)
_LAUNCH = re.compile(
    r"invalid configuration argument|cudaErrorInvalidConfiguration|CUDA_ERROR_INVALID_VALUE|cudaErrorInvalidValue|"
    r"too many resources requested for launch|CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES|cudaErrorLaunchOutOfResources|"
    r"CUDA error: invalid argument|out of resource: shared memory"
)
_BEFORE_CUDA_TYPES = frozenset({"ModuleNotFoundError", "ImportError", "SyntaxError", "IndentationError"})
_MISSING_ATTRIBUTE = re.compile(r"module '[\w.]+' has no attribute")
_CHECK_FAILED = frozenset({"AssertionError"})
_MISMATCH = re.compile(r"Tensor-likes are not (?:close|equal)|Not equal to tolerance|Arrays are not (?:almost )?equal|"
                       r"[Mm]ismatch(?:ed)? elements")  # fmt: skip
_CUDA_WORDS = re.compile(r"CUDA|cuda|cu[A-Z]\w+|GPU|[Kk]ernel|PTX|ptx|NVRTC|nvrtc|device|Triton|triton|Mojo|MAX")
# A program that launches kernels of its own: the launchers as users write them.
_OWN_KERNELS = re.compile(
    r"RawKernel|RawModule|ElementwiseKernel|ReductionKernel|@triton\.jit|triton\.jit|@cuda\.jit|cuda\.jit\b|"
    r"cuda\.core|from cuda import|Program\(|CustomOpLibrary|graph_op|load_inline|cpp_extension|SourceModule|"
    r"__global__"
)
# A torch program that puts its tensors on the GPU (a failed check of them is a question for the GPU's instruments,
# as a check after a program's own kernels is): torch's own kernels on streams it chose, ordered or not.
_USES_GPU = re.compile(r"\.cuda\(|device\s*=\s*['\"]cuda|torch\.cuda\.Stream|\.to\(\s*['\"]cuda")
_TORCH_PROGRAM = re.compile(r"^\s*(?:import torch|from torch\b)", re.M)
OUT_OF_MEMORY = re.compile(r"out of memory|CUDA_ERROROUT_OF_MEMORY|cudaErrorMemoryAllocation|OutOfMemoryError")
_NO_BINARY = re.compile(r"CUDA_ERROR_NO_BINARY_FOR_GPU|no kernel image is available|cudaErrorNoKernelImageForDevice")
_HOST_SIGNALS = ("SIGSEGV", "SIGABRT", "SIGBUS", "SIGILL", "SIGFPE")
MAX_SOURCE_BYTES = 1024 * 1024


def failing_words(result: ProbeResult) -> str:
    """The words of the failure itself: the exception's type and message and the summary — not the traceback's
    paths and code lines (a KeyError raised beside `Device()` in cuda/core/... is not a CUDA error); without an
    exception (a crash, a launcher's message), the stderr's last lines, where a CUDA error is printed."""
    if result.exception_type:
        return "\n".join(part for part in (result.exception_type, result.message, result.summary) if part)
    tail = "\n".join((result.stderr_tail or "").splitlines()[-12:])
    return "\n".join(part for part in (result.summary, tail) if part)


def launches_own_kernels(sources: Iterable[str]) -> bool:
    """Whether the program's own files (their text) launch kernels of their own."""
    return any(_OWN_KERNELS.search(text) for text in sources)


def program_sources(argv: Iterable[str], cwd: Path) -> list[str]:
    """The text of the Python files the command names (bounded; unreadable ones skipped)."""
    texts = []
    for arg in argv:
        path = cwd / arg
        if not arg.endswith(".py"):
            continue
        try:
            if path.is_file() and path.stat().st_size <= MAX_SOURCE_BYTES:
                texts.append(path.read_text(errors="replace"))
        except OSError:
            continue
    return texts


def triage(result: ProbeResult, sources: Iterable[str] = ()) -> FailureClass:
    """The class of ``result``'s failure; ``sources``: the text of the program's own files."""
    if result.outcome is Outcome.PASS:
        return FailureClass.PASSED
    if result.outcome is Outcome.TIMEOUT:
        return FailureClass.HANG
    text = "\n".join(p for p in (result.summary, result.message, result.stderr_tail) if p)
    words = failing_words(result)
    if _FORK.search(text) or (_FORKED_INIT.search(words) and _FORKED.search(text)):
        return FailureClass.PROCESS_MODEL
    # before the memory faults: torch's message for these advises compiling with device-side assertions too
    if OUT_OF_MEMORY.search(words):
        return FailureClass.OUT_OF_MEMORY
    if _NO_BINARY.search(words):
        return FailureClass.NO_BINARY
    if _MEMORY.search(text):
        return FailureClass.MEMORY_FAULT
    if _LAUNCH.search(words):
        return FailureClass.LAUNCH_REFUSED
    if result.outcome is Outcome.CRASH and (result.signal or "") in _HOST_SIGNALS:
        return FailureClass.HOST_CRASH
    if result.outcome is Outcome.CRASH:
        return FailureClass.OTHER
    if result.exception_type in _BEFORE_CUDA_TYPES or (
        result.exception_type == "AttributeError" and _MISSING_ATTRIBUTE.search(words)
    ):
        return FailureClass.BEFORE_CUDA
    checked = result.exception_type in _CHECK_FAILED or bool(_MISMATCH.search(words))
    if checked and (launches_own_kernels(sources) or any(_USES_GPU.search(t) for t in sources)):
        return FailureClass.WRONG_RESULT
    if not _CUDA_WORDS.search(words):
        return FailureClass.PYTHON_ERROR
    return FailureClass.OTHER
