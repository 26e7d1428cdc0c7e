"""Careless and hostile inputs, each one run as a real ``gpudoctor`` process, with the answer it must give.

Shared by tests/test_hostile.py (which asserts every answer) and scripts/hostile_inputs.py (which runs them all
and writes the table in docs/hostile-inputs.md). ``{d}`` in arguments is a scratch folder that ``prepare`` fills
with bad interpreters, special files and broken data; a case whose ``mount`` is set runs with ``{d}/mnt`` a
real read-only or full file system (a private mount namespace as root; a read-only folder otherwise).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURE = TESTS / "fixtures" / "h100-suite-report.json"
KERNEL = TESTS / "kernels" / "cpu_zeros"
TIMEOUT_S = 120


@dataclass(frozen=True)
class Case:
    id: str
    tried: str  # the input, in words
    args: tuple[str, ...]  # gpudoctor's arguments ({d}: the scratch folder)
    exit: int
    says: str  # what the one line on stderr must contain (exit 2); for 0 and 1, what stdout or stderr says
    mount: str | None = None  # "ro", "ro-rows" (holding the real rows) or "full": {d}/mnt is such a file system
    stdout: str = "pipe"  # "full" (/dev/full), "closed" (descriptor 1 closed), "broken" (a pipe nobody reads)
    twice: bool = False  # run it twice; the answer checked is the second's


def _script(path: Path, body: str, mode: int = 0o755) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(mode)


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as handle:
        handle.truncate(size)


def _catalog(folder: Path, body: str) -> None:
    folder.mkdir()
    (folder / "a.py").write_text("")
    (folder / "catalog.toml").write_text(body)


def prepare(d: Path) -> None:
    """Fill the scratch folder ``d`` with everything the cases point at."""
    _script(d / "prints-hello", "echo hello")
    _script(d / "prints-nothing", "exit 0")
    _script(d / "segfaults", "kill -SEGV $$")
    _script(d / "pypy", """echo '{"implementation": "PyPy", "python": "3.10.14", "packages": {}}'""")
    _script(d / "python2", """echo '{"implementation": "CPython", "python": "2.7.18", "packages": {}}'""")
    _script(d / "not-executable", "exit 0", mode=0o644)
    _script(d / "spews", "head -c 50000000 /dev/zero | tr '\\0' x")
    os.mkfifo(d / "fifo")
    (d / "folder").mkdir()
    (d / "file").write_text("a file\n")
    (d / "mnt").mkdir()
    probe = 'id = "a"\nscript = "a.py"\ntitle = "t"\n'
    (d / "no-catalog").mkdir()
    (d / "catalog-folder").mkdir()
    (d / "catalog-folder" / "catalog.toml").mkdir()
    (d / "catalog-fifo").mkdir()
    os.mkfifo(d / "catalog-fifo" / "catalog.toml")
    _catalog(d / "catalog-huge", "")
    _sparse(d / "catalog-huge" / "catalog.toml", 100 * 1024 * 1024)
    _catalog(d / "catalog-binary", "")
    (d / "catalog-binary" / "catalog.toml").write_bytes(b'[[probe]]\nid = "\xff\xfe"\n')
    _catalog(d / "catalog-not-toml", "[[probe]\n")
    _catalog(d / "catalog-inf", f"[[probe]]\n{probe}timeout_s = inf\n")
    _catalog(d / "catalog-escape", '[[probe]]\nid = "a"\nscript = "../file"\ntitle = "t"\n')
    _catalog(d / "catalog-stage-bool", f"[[probe]]\n{probe}stage = true\n")
    _catalog(
        d / "catalog-cycle",
        '[[probe]]\nid = "a"\nscript = "a.py"\ntitle = "t"\nafter = ["b"]\n\n'
        '[[probe]]\nid = "b"\nscript = "a.py"\ntitle = "t"\nafter = ["a"]\n',
    )
    _sparse(d / "huge.toml", 100 * 1024 * 1024)
    _sparse(d / "huge.json", 100 * 1024 * 1024)
    (d / "not-toml.toml").write_text("[[call]\n")
    (d / "spec-types.toml").write_text('[[call]]\nop = "double"\nshape = ["a"]\n')
    (d / "spec-huge-shape.toml").write_text('[[call]]\nop = "double"\nshape = [100000, 100000]\n')
    (d / "not-json.json").write_text("{not json")
    (d / "list.json").write_text("[]")
    (d / "deep.json").write_text("[" * 200000 + "]" * 200000)
    report = json.loads(FIXTURE.read_text())
    (d / "report.json").write_text(json.dumps(report))
    (d / "schema-99.json").write_text(json.dumps({**report, "schema_version": 99}))
    (d / "missing-field.json").write_text(json.dumps({k: v for k, v in report.items() if k != "environment"}))
    (d / "matrix-file").write_text("a file where the matrix folder should be\n")
    for name in ("row-fifo", "row-folder", "row-huge"):
        rows = d / name / "rows"
        rows.mkdir(parents=True)
        target = rows / "cpu_torch-2.13.0_max-26.7.0_000000000000.toml"
        if name == "row-fifo":
            os.mkfifo(target)
        elif name == "row-folder":
            target.mkdir()
        else:
            _sparse(target, 100 * 1024 * 1024)
    (d / "grid-bad.toml").write_text('torch = "2.13"\n')


P = ("--plain", "--no-probes")
ONE_LINE_PYTHON = "give --python the path of a CPython 3 interpreter"

CASES: tuple[Case, ...] = (
    # --- interpreters --------------------------------------------------------------------------------------------
    Case("python-prints-other", "--python: a program that prints something else", (*P, "--python", "{d}/prints-hello"),
         2, "not a Python interpreter that answers; it printed 'hello'"),
    Case("python-prints-nothing", "--python: a program that prints nothing", (*P, "--python", "{d}/prints-nothing"),
         2, "not a Python interpreter that answers; it printed nothing"),
    Case("python-crashes", "--python: a program that segfaults", (*P, "--python", "{d}/segfaults"),
         2, "killed by signal 11; it printed nothing"),
    Case("python-spews", "--python: a program that prints 50 MB", (*P, "--python", "{d}/spews"),
         2, "not a Python interpreter that answers; it printed 'xxxx"),
    Case("python-pypy", "--python: an interpreter that is not CPython", (*P, "--python", "{d}/pypy"),
         2, "PyPy 3.10.14, not CPython 3"),
    Case("python-2", "--python: a Python 2", (*P, "--python", "{d}/python2"), 2, "CPython 2.7.18, not CPython 3"),
    Case("python-missing", "--python: a path that does not exist", (*P, "--python", "{d}/nope"),
         2, "no such interpreter"),
    Case("python-folder", "--python: a folder", (*P, "--python", "{d}/folder"),
         2, "is a folder, not an interpreter"),
    Case("python-not-executable", "--python: a file without the executable bit",
         (*P, "--python", "{d}/not-executable"), 2, "not an executable file"),
    Case("python-empty", "--python ''", (*P, "--python", ""), 2, "an empty path"),
    Case("python-fifo", "--python: a FIFO", (*P, "--python", "{d}/fifo"), 2, "not an executable file"),
    Case("kernel-python-other", "gpudoctor kernel --python: prints something else",
         ("kernel", str(KERNEL), "--python", "{d}/prints-hello"), 2, "it printed 'hello'"),
    Case("near-python-other", "matrix near --python: prints something else",
         ("matrix", "near", "--python", "{d}/prints-hello"), 2, "it printed 'hello'"),
    Case("near-python-nothing", "matrix near --python: prints nothing",
         ("matrix", "near", "--python", "{d}/prints-nothing"), 2, "it printed nothing"),
    Case("add-python-other", "matrix add --python: prints something else",
         ("matrix", "add", "--matrix", "{d}/m", "--python", "{d}/prints-hello"), 2, "it printed 'hello'"),
    Case("scan-python-other", "scan --python: prints something else",
         ("scan", str(KERNEL), "--python", "{d}/prints-hello"), 2, "it printed 'hello'"),
    Case("patch-python-other", "patch install --python: prints something else",
         ("patch", "install", "float8-e8m0fnu-alias", "--python", "{d}/prints-hello"), 2, "it printed 'hello'"),
    # --- numbers -------------------------------------------------------------------------------------------------
    Case("timeout-inf", "--timeout inf (would turn every limit off)", ("--plain", "--timeout", "inf"),
         2, "argument --timeout: must be seconds above 0 and at most 86400: 'inf'"),
    Case("timeout-nan", "--timeout nan", ("--plain", "--timeout", "nan"),
         2, "argument --timeout: must be seconds above 0 and at most 86400: 'nan'"),
    Case("timeout-negative", "--timeout -1", ("--plain", "--timeout=-1"), 2, "must be seconds above 0"),
    Case("timeout-zero", "--timeout 0", ("--plain", "--timeout", "0"), 2, "must be seconds above 0"),
    Case("timeout-huge", "--timeout 1e9", ("--plain", "--timeout", "1e9"), 2, "at most 86400: '1e9'"),
    Case("timeout-text", "--timeout soon", ("--plain", "--timeout", "soon"), 2, "not a number of seconds: 'soon'"),
    Case("jobs-zero", "--jobs 0", ("--plain", "--jobs", "0"), 2, "argument --jobs/-j: must be from 1 to 256: '0'"),
    Case("jobs-huge", "--jobs 100000", ("--plain", "--jobs", "100000"), 2, "must be from 1 to 256: '100000'"),
    Case("jobs-text", "--jobs many", ("--plain", "--jobs", "many"), 2, "not a whole number: 'many'"),
    Case("kernel-timeout-inf", "gpudoctor kernel --timeout inf", ("kernel", str(KERNEL), "--timeout", "inf"),
         2, "must be seconds above 0"),
    Case("sweep-timeout-nan", "gpudoctor sweep --timeout nan", ("sweep", "--timeout", "nan"),
         2, "must be seconds above 0"),
    Case("sweep-parallel-zero", "gpudoctor sweep --parallel 0", ("sweep", "--parallel", "0"),
         2, "must be from 1 to 64: '0'"),
    Case("near-count-zero", "matrix near --count 0", ("matrix", "near", "--count", "0"), 2, "must be from 1 to 1000"),
    Case("shape-negative", "kernel --shape -1x3", ("kernel", str(KERNEL), "--op", "double", "--shape=-1x3"),
         2, "a shape is a non-empty list of positive whole numbers"),
    Case("shape-huge", "kernel --shape 100000x100000 (40 GB)",
         ("kernel", str(KERNEL), "--op", "double", "--shape", "100000x100000"), 2, "too large for a diagnosis"),
    Case("param-bad", "kernel --param without =", ("kernel", str(KERNEL), "--op", "double", "--param", "n"),
         2, "--param 'n': write it as name=value"),
    # --- probe folders and catalogs ------------------------------------------------------------------------------
    Case("probes-file", "--probes: a file", ("--plain", "--probes", "{d}/file"),
         2, "argument --probes: {d}/file: not a folder"),
    Case("probes-missing", "--probes: missing", ("--plain", "--probes", "{d}/nope"), 2, "{d}/nope: no such folder"),
    Case("probes-no-catalog", "--probes: a folder without catalog.toml", ("--plain", "--probes", "{d}/no-catalog"),
         2, "catalog.toml: no probe catalog here"),
    Case("catalog-folder", "catalog.toml is a folder", ("--plain", "--probes", "{d}/catalog-folder"),
         2, "catalog.toml: is a folder, not a file"),
    Case("catalog-fifo", "catalog.toml is a FIFO (would block)", ("--plain", "--probes", "{d}/catalog-fifo"),
         2, "catalog.toml: not a regular file"),
    Case("catalog-huge", "catalog.toml of 100 MB", ("--plain", "--probes", "{d}/catalog-huge"),
         2, "catalog.toml: larger than 256 KiB; not read"),
    Case("catalog-binary", "catalog.toml not UTF-8", ("--plain", "--probes", "{d}/catalog-binary"),
         2, "catalog.toml: not UTF-8 text"),
    Case("catalog-not-toml", "catalog.toml not TOML", ("--plain", "--probes", "{d}/catalog-not-toml"),
         2, "catalog.toml: not valid TOML"),
    Case("catalog-timeout-inf", "catalog timeout_s = inf", ("--plain", "--probes", "{d}/catalog-inf"),
         2, "field 'timeout_s' must be seconds, above 0 and at most 86400"),
    Case("catalog-script-escapes", "catalog script = '../file'", ("--plain", "--probes", "{d}/catalog-escape"),
         2, "field 'script' must be a path inside the probe folder"),
    Case("catalog-stage-bool", "catalog stage = true", ("--plain", "--probes", "{d}/catalog-stage-bool"),
         2, "field 'stage': must be a whole number from 0 to 99"),
    Case("catalog-cycle", "catalog: a after b, b after a", ("--plain", "--probes", "{d}/catalog-cycle"),
         2, "probe prerequisites form a cycle"),
    # --- kernel specs and packages -------------------------------------------------------------------------------
    Case("spec-fifo", "kernel --spec: a FIFO", ("kernel", str(KERNEL), "--spec", "{d}/fifo"),
         2, "argument --spec: {d}/fifo: not a regular file"),
    Case("spec-device", "kernel --spec /dev/zero (took 23 GB before)", ("kernel", str(KERNEL), "--spec", "/dev/zero"),
         2, "argument --spec: /dev/zero: not a regular file"),
    Case("spec-folder", "kernel --spec: a folder", ("kernel", str(KERNEL), "--spec", "{d}/folder"),
         2, "is a folder, not a file"),
    Case("spec-missing", "kernel --spec: missing", ("kernel", str(KERNEL), "--spec", "{d}/nope"), 2, "no such file"),
    Case("spec-huge", "kernel --spec of 100 MB", ("kernel", str(KERNEL), "--spec", "{d}/huge.toml"),
         2, "huge.toml: larger than 256 KiB; not read"),
    Case("spec-not-toml", "kernel --spec not TOML", ("kernel", str(KERNEL), "--spec", "{d}/not-toml.toml"),
         2, "not valid TOML"),
    Case("spec-types", "kernel --spec shape = ['a']", ("kernel", str(KERNEL), "--spec", "{d}/spec-types.toml"),
         2, "a shape is a non-empty list of positive whole numbers"),
    Case("spec-huge-shape", "kernel --spec shape = [100000, 100000]",
         ("kernel", str(KERNEL), "--spec", "{d}/spec-huge-shape.toml"), 2, "too large for a diagnosis"),
    Case("kernel-fifo", "kernel PATH: a FIFO", ("kernel", "{d}/fifo"), 2, "{d}/fifo: not a folder or a file"),
    Case("kernel-device", "kernel PATH: /dev/null", ("kernel", "/dev/null"), 2, "/dev/null: not a folder or a file"),
    Case("kernel-missing", "kernel PATH: missing", ("kernel", "{d}/nope"), 2, "{d}/nope: no such file or directory"),
    Case("kernel-dotdot", "kernel PATH with a/../b (printed normalised)", ("kernel", "{d}/folder/../nope"),
         2, "error: {d}/nope: no such file or directory"),
    Case("reference-missing", "kernel --reference nope.py:f", ("kernel", str(KERNEL), "--op", "double",
         "--reference", "{d}/nope.py:f"), 2, "reference file"),
    # --- reports read back ---------------------------------------------------------------------------------------
    Case("from-fifo", "matrix add --from: a FIFO", ("matrix", "add", "--matrix", "{d}/m", "--from", "{d}/fifo"),
         2, "argument --from: {d}/fifo: not a regular file"),
    Case("from-folder", "matrix add --from: a folder",
         ("matrix", "add", "--matrix", "{d}/m", "--from", "{d}/folder"), 2, "is a folder, not a file"),
    Case("from-not-json", "matrix add --from: not JSON",
         ("matrix", "add", "--matrix", "{d}/m", "--from", "{d}/not-json.json"), 2, "not a gpudoctor --json report"),
    Case("from-list", "matrix add --from: a JSON list",
         ("matrix", "add", "--matrix", "{d}/m", "--from", "{d}/list.json"), 2, "a JSON list, not an object"),
    Case("from-deep", "matrix add --from: JSON nested 200,000 deep",
         ("matrix", "add", "--matrix", "{d}/m", "--from", "{d}/deep.json"), 2, "not a gpudoctor --json report"),
    Case("from-schema-99", "matrix add --from: a report of an unknown schema version",
         ("matrix", "add", "--matrix", "{d}/m", "--from", "{d}/schema-99.json"),
         2, "field 'schema_version': 99; this gpudoctor reads version 1"),
    Case("from-missing-field", "matrix add --from: a report without its environment",
         ("matrix", "add", "--matrix", "{d}/m", "--from", "{d}/missing-field.json"), 2, "field 'environment': missing"),
    Case("from-huge", "matrix add --from: 100 MB", ("matrix", "add", "--matrix", "{d}/m", "--from", "{d}/huge.json"),
         2, "huge.json: larger than 64 MiB; not read"),
    Case("near-from-schema-99", "matrix near --from: unknown schema version",
         ("matrix", "near", "--from", "{d}/schema-99.json"), 2, "field 'schema_version': 99"),
    Case("same-report-twice", "matrix add the same report twice (counted once)",
         ("matrix", "add", "--matrix", "{d}/m2", "--from", "{d}/report.json"),
         0, "was recorded before; nothing changed", twice=True),
    # --- matrix folders ------------------------------------------------------------------------------------------
    Case("matrix-is-file", "matrix add --matrix: a file",
         ("matrix", "add", "--matrix", "{d}/matrix-file", "--from", "{d}/report.json"), 2, "is not a folder"),
    Case("matrix-under-file", "matrix add --matrix: a path under a file",
         ("matrix", "add", "--matrix", "{d}/matrix-file/x", "--from", "{d}/report.json"), 2, "is not a folder"),
    Case("matrix-read-only", "matrix add into a read-only file system",
         ("matrix", "add", "--matrix", "{d}/mnt", "--from", "{d}/report.json"), 2, "cannot write to the matrix",
         mount="ro"),
    Case("matrix-full", "matrix add onto a full disk",
         ("matrix", "add", "--matrix", "{d}/mnt", "--from", "{d}/report.json"), 2, "No space left on device",
         mount="full"),
    Case("readme-read-only", "matrix readme into a read-only file system",
         ("matrix", "readme", "--matrix", "{d}/mnt"), 2, "README.md: Read-only file system", mount="ro-rows"),
    Case("row-fifo", "matrix check: a row that is a FIFO", ("matrix", "check", "--matrix", "{d}/row-fifo"),
         1, "not a regular file"),
    Case("row-folder", "matrix check: a row that is a folder", ("matrix", "check", "--matrix", "{d}/row-folder"),
         1, "is a folder, not a file"),
    Case("row-huge", "matrix check: a row of 100 MB", ("matrix", "check", "--matrix", "{d}/row-huge"),
         1, "larger than"),
    Case("show-row-fifo", "matrix show with a FIFO row", ("matrix", "show", "--matrix", "{d}/row-fifo"),
         2, "not a regular file"),
    Case("note-control", "matrix add --note with a terminal escape",
         ("matrix", "add", "--matrix", "{d}/m", "--from", "{d}/report.json", "--note", "a\x1b[31mred"),
         2, "contains a control character"),
    Case("note-long", "matrix add --note of 5,000 characters",
         ("matrix", "add", "--matrix", "{d}/m", "--from", "{d}/report.json", "--note", "x" * 5000),
         2, "longer than"),
    Case("grid-fifo", "sweep --grid: a FIFO", ("sweep", "--grid", "{d}/fifo"), 2, "not a regular file"),
    Case("grid-bad", "sweep --grid: torch not a list", ("sweep", "--grid", "{d}/grid-bad.toml"), 2, "grid-bad.toml"),
    # --- scan ------------------------------------------------------------------------------------------------------
    Case("scan-fifo", "scan PATH: a FIFO", ("scan", "{d}/fifo"), 2, "not a folder or a regular file"),
    Case("scan-device", "scan PATH: /dev/zero", ("scan", "/dev/zero"), 2, "/dev/zero: not a folder or a regular file"),
    Case("scan-max-bad", "scan --max banana", ("scan", str(KERNEL), "--max", "banana"), 2, "not a version like"),
    # --- output and usage ----------------------------------------------------------------------------------------
    Case("stdout-full", "stdout is /dev/full", ("--no-probes", "--json"),
         2, "cannot write to stdout: No space left on device", stdout="full"),
    Case("stdout-closed", "stdout closed (>&-)", ("--no-probes", "--json"), 2, "stdout is closed", stdout="closed"),
    Case("stdout-broken", "stdout a pipe nobody reads", ("matrix", "show"), 2, "cannot write to stdout: Broken pipe",
         stdout="broken"),
    Case("unknown-option", "an unknown option", ("--frobnicate",), 2, "unrecognized arguments: --frobnicate"),
    Case("unknown-command", "matrix frobnicate", ("matrix", "frobnicate"), 2, "argument COMMAND: invalid choice"),
    Case("device-bogus", "--device tpu", ("--plain", "--device", "tpu"), 2, "argument --device: invalid choice"),
    Case("patch-unknown", "patch show nope", ("patch", "show", "nope"), 2, "invalid choice: 'nope'"),
    Case("json-and-markdown", "--json --markdown", ("--json", "--markdown"), 2, "not allowed with argument"),
)  # fmt: skip


def expand(text: str, d: Path) -> str:
    return text.replace("{d}", str(d))


def can_mount() -> bool:
    """Whether this process may make a private mount namespace (root with unshare): real read-only and full
    file systems then; otherwise a folder without write permission stands in for read-only."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False).returncode == 0


_MOUNT = {
    "ro": 'mount -t tmpfs -o ro,size=1m tmpfs "$M"',
    "ro-rows": f'mount -t tmpfs -o size=4m tmpfs "$M" && cp -r {ROOT}/matrix/rows "$M" && mount -o remount,ro "$M"',
    # A small tmpfs filled to the last block: the lock file and folder fit (inodes), the row does not.
    "full": 'mount -t tmpfs -o size=64k tmpfs "$M" && (head -c 1048576 /dev/zero > "$M/filler" 2>/dev/null; true)',
}


def command(case: Case, d: Path, mounts: bool) -> list[str] | None:
    """The argv that runs ``case``; None when it needs a file system this machine cannot make."""
    argv = [sys.executable, "-m", "gpudoctor", *(expand(a, d) for a in case.args)]
    if case.mount is None:
        return argv
    if mounts:
        # What is left on the file system afterwards goes to {d}/mnt-after.txt (the mount ends with the process).
        script = f'M={d}/mnt; {_MOUNT[case.mount]} || exit 99; "$@"; rc=$?; '
        script += f'(cd "$M" && find . -mindepth 1 ! -name filler | sort) > {d}/mnt-after.txt; exit $rc'
        return ["unshare", "-m", "sh", "-c", script, "sh", *argv]
    if case.mount == "ro" and os.geteuid() != 0:  # "ro-rows" would need the rows copied: mounts only
        (d / "mnt").chmod(stat.S_IRUSR | stat.S_IXUSR)
        return argv
    return None


@dataclass(frozen=True)
class Answer:
    exit: int
    stdout: str
    stderr: str


def run_case(case: Case, d: Path, mounts: bool, env: dict[str, str] | None = None) -> Answer | None:
    """Run ``case`` as a real process (twice if it says so); None when this machine cannot make its setup."""
    argv = command(case, d, mounts)
    if argv is None:
        return None
    answer = None
    for _ in range(2 if case.twice else 1):
        answer = _run(argv, case.stdout, d, env)
    return answer


def _run(argv: list[str], stdout: str, d: Path, env: dict[str, str] | None) -> Answer:
    preexec: Callable[[], None] | None = None
    opened = os.open("/dev/full", os.O_WRONLY) if stdout == "full" else None
    out_target = opened if opened is not None else subprocess.PIPE
    if stdout == "closed":
        out_target = subprocess.DEVNULL

        def preexec() -> None:
            os.close(1)

    process = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=out_target,
        stderr=subprocess.PIPE,
        cwd=d,
        env=env,
        preexec_fn=preexec,
    )
    if stdout == "broken":
        assert process.stdout is not None
        process.stdout.close()  # the reader is gone before the first byte
    try:
        out, err = process.communicate(timeout=TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
        if opened is not None:
            os.close(opened)
    return Answer(process.returncode, (out or b"").decode(errors="replace"), err.decode(errors="replace"))
