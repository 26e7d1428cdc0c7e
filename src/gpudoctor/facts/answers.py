"""What programs answer about themselves (``nvcc --version``, ``nvcc --dryrun``, ``gcc -dumpversion``,
``ldconfig -p``, Triton's ``ptxas --version``), asked in a child process and kept in gpudoctor's cache while nothing
it depends on changed.

The inventory asks up to six such questions, 2-25 ms each (``nvcc --dryrun`` the longest); a warm inventory reads them
back. An answer is kept only for a compiled program (an ELF file, not a script) whose resolved name is the one asked
for (``gcc`` -> ``gcc-12`` or ``x86_64-linux-gnu-gcc-13``; not a ``ccache`` or ``busybox`` standing in for it, whose
answer comes from another program), keyed by the exact command, that file's identity (resolved path, inode, size,
time) and the identities of the files its answer is read from (``/etc/ld.so.cache`` for ``ldconfig -p``), under
gpudoctor's version. A new toolkit, compiler or cache file is a new key: nothing is reused across a change of any of
them. A wrapper script (``/usr/local/bin/nvcc`` exec'ing a toolkit's) is asked every time, its questions side by side.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from gpudoctor.memo import Memo, file_identity

ANSWERS = Memo("program-answers")
ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class Answer:
    """How a program ended and what it printed."""

    returncode: int
    stdout: str
    stderr: str


def _keepable(program: str) -> bool:
    """Whether ``program``'s answer is its own: a compiled file whose resolved name starts with the name asked for."""
    resolved = os.path.realpath(program)
    asked = re.escape(os.path.basename(program))
    if not re.search(rf"(?:^|[-_]){asked}(?:[-_.]|$)", os.path.basename(resolved)):
        return False
    try:
        with open(resolved, "rb") as handle:
            return handle.read(4) == ELF_MAGIC
    except OSError:
        return False


def ask_program(argv: Sequence[str], timeout_s: float, reads: Sequence[str] = ()) -> Answer | None:
    """What ``argv`` answers (``reads``: the files its answer comes from); None when it cannot be run or does not
    answer within ``timeout_s``. A kept answer is returned without running it (see the module's docstring)."""
    program = argv[0] if os.sep in argv[0] else shutil.which(argv[0])
    key = None
    if program is not None and _keepable(program):
        key = [list(argv), file_identity(program), [file_identity(path) for path in reads]]
        kept = ANSWERS.get(key)
        if isinstance(kept, list) and len(kept) == 3 and isinstance(kept[0], int):
            return Answer(kept[0], str(kept[1]), str(kept[2]))
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if key is not None:
        ANSWERS.put(key, [done.returncode, done.stdout, done.stderr])
    return Answer(done.returncode, done.stdout, done.stderr)
