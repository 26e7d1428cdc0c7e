"""Which interpreter to examine, and proof that it is one: resolve ``--python`` and put questions to it.

Every question runs the interpreter in its own process group, with a time limit, bounded output and the
session's cancel scope; an answer that is not what a CPython 3 prints is a usage error quoting what came back.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from gpudoctor.errors import GpuDoctorError
from gpudoctor.process.cancel import CancelScope
from gpudoctor.redact import redact_text

ANSWER_LIMIT = 4 * 1024 * 1024  # the answer is the last line; more than this is not an answer
ANSWER_TIMEOUT_S = 60.0
HINT = "give --python the path of a CPython 3 interpreter (a venv's bin/python)"


def resolve_python(python: str | None) -> str:
    """An absolute path to the interpreter to examine (an executable file), or a usage error naming what was
    wrong with it."""
    if python is None:
        return sys.executable
    if not python.strip():
        raise GpuDoctorError("--python '': an empty path", hint=HINT)
    found = shutil.which(python) if "/" not in python else python
    if found is None or not os.path.exists(found):
        raise GpuDoctorError(f"--python {python}: no such interpreter", hint=HINT)
    if os.path.isdir(found):
        raise GpuDoctorError(f"--python {python}: is a folder, not an interpreter", hint=HINT)
    if not os.path.isfile(found) or not os.access(found, os.X_OK):
        raise GpuDoctorError(f"--python {python}: not an executable file", hint=HINT)
    return os.path.abspath(found)


def _quote(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "...")


def ask(python: str, source: str, *args: str, cancel: CancelScope | None = None) -> dict[str, Any]:
    """Run ``source`` (which prints one JSON object as its last line) in the interpreter at ``python``.

    Anything else (no answer, another program's output, a crash, no answer within ANSWER_TIMEOUT_S) is a
    GpuDoctorError that says what the program did instead; a cancelled ``cancel`` kills it and raises
    Cancelled.
    """
    from gpudoctor.process.supervise import supervise  # only another interpreter is asked: not the inventory-only run

    owner = cancel if cancel is not None else CancelScope()
    try:
        ran = supervise(
            [python, "-c", source, *args], owner, ANSWER_TIMEOUT_S, capture_limit=64 * 1024, stdout_limit=ANSWER_LIMIT
        ).unless_cancelled()
    except OSError as error:
        raise GpuDoctorError(f"--python {python}: cannot run it: {error.strerror or error}", hint=HINT) from error
    returncode, stdout, stderr = ran.returncode, ran.stdout.data.decode("utf-8", "replace"), ran.stderr.text()
    name = redact_text(python)
    if ran.timed_out:
        raise GpuDoctorError(f"--python {name}: no answer within {ANSWER_TIMEOUT_S:g} s", hint=HINT)
    if returncode != 0:
        said = stderr.strip().splitlines()[-1] if stderr.strip() else stdout.strip()
        how = f"killed by signal {-returncode}" if returncode < 0 else f"exited with status {returncode}"
        printed = f"it printed {_quote(redact_text(said))}" if said else "it printed nothing"
        raise GpuDoctorError(f"--python {name}: {how}; {printed}", hint=HINT)
    lines = stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        said = _quote(redact_text(stdout)) if stdout.strip() else "nothing"
        raise GpuDoctorError(f"--python {name}: not a Python interpreter that answers; it printed {said}", hint=HINT)
    return answer


def check_cpython(python: str, answer: dict[str, Any]) -> None:
    """Refuse an interpreter that is not CPython 3 (the probes and MAX need one)."""
    implementation, version = answer.get("implementation"), answer.get("python")
    if implementation != "CPython" or not isinstance(version, str) or not version.startswith("3."):
        answered = f"it answered {_quote(json.dumps(answer))}"
        what = f"{implementation} {version}" if implementation and version else answered
        raise GpuDoctorError(f"--python {redact_text(python)}: {what}, not CPython 3", hint=HINT)


def site_packages(python: str, cancel: CancelScope | None = None) -> Path:
    """The site-packages folder (purelib) of the interpreter at ``python``."""
    answer = ask(
        python,
        "import json, platform, sysconfig; print(json.dumps({'implementation': platform.python_implementation(), "
        "'python': platform.python_version(), 'purelib': sysconfig.get_path('purelib')}))",
        cancel=cancel,
    )
    check_cpython(python, answer)
    site = Path(str(answer.get("purelib")))
    if not site.is_dir():
        raise GpuDoctorError(f"--python {redact_text(python)}: its site-packages {site} is not a folder")
    return site


# The folders imports search (sys.path, made absolute as the interpreter would resolve them), and the values
# requirement markers are evaluated with. Compatible with old Pythons.
_SEARCH_PATH_SOURCE = """
import json, os, platform, sys
print(json.dumps({"path": [os.path.abspath(p or os.curdir) for p in sys.path], "markers": {
    "implementation_name": sys.implementation.name, "os_name": os.name, "platform_machine": platform.machine(),
    "platform_release": platform.release(), "platform_system": platform.system(),
    "platform_version": platform.version(), "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": "%d.%d" % sys.version_info[:2], "sys_platform": sys.platform,
    "implementation_version": "%d.%d.%d" % tuple(sys.implementation.version[:3])}}))
"""
MAX_PATH_ENTRIES = 64


def search_path(python: str, cancel: CancelScope | None = None) -> tuple[list[str], dict[str, str]] | None:
    """The interpreter's import path (folders that exist, at most MAX_PATH_ENTRIES) and its marker values; None
    when it does not answer (the caller goes on without them)."""
    try:
        answer = ask(python, _SEARCH_PATH_SOURCE, cancel=cancel)
    except GpuDoctorError:
        return None
    path, markers = answer.get("path"), answer.get("markers")
    if not isinstance(path, list) or not isinstance(markers, dict):
        return None
    folders = [p for p in dict.fromkeys(str(p) for p in path) if os.path.isdir(p)][:MAX_PATH_ENTRIES]
    return folders, {str(k): str(v) for k, v in markers.items()}
