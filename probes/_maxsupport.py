"""What the MAX probes share: finding MAX's torch bridge across API generations, and the control kernels.

MAX moved its PyTorch bridge from ``max.torch`` to ``max.experimental.torch`` (26.7), and Mojo 1.x
changed the kernel language; the probes cope with both generations here, in one place.
Standard library only at import time; compatible with Python 3.8.
"""

import os
import re

from _harness import CheckFailed, Skip

BRIDGE_MODULES = ("max.torch", "max.experimental.torch")
_FLOAT8_ALIAS = "float8_e8m0fnu"


class BridgeMissingFloat8(CheckFailed):
    """MAX's torch bridge needs torch.float8_e8m0fnu, which this torch lacks."""


def import_bridge(ctx):
    """Import MAX's torch bridge, whichever module this MAX has; record which one it was."""
    import importlib

    tried = []
    for name in BRIDGE_MODULES:
        ctx.step("import %s" % name)
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            # Only "this module does not exist" moves on; a failure inside the bridge is the finding.
            if error.name is not None and name.startswith(error.name):
                tried.append("%s (%s)" % (name, error))
                continue
            raise
        except AttributeError as error:
            if _FLOAT8_ALIAS in str(error):
                import torch

                raise BridgeMissingFloat8(
                    "%s failed at import: torch %s has no torch.%s, which MAX's bridge maps to "
                    "DType.%s (%s)" % (name, torch.__version__, _FLOAT8_ALIAS, _FLOAT8_ALIAS, error)
                )
            raise
        ctx.detail("bridge_module", name)
        return module
    raise CheckFailed("no MAX torch bridge found: " + "; ".join(tried))


def require_api(ctx, bridge, name):
    """``bridge.name``, or a skip saying this MAX's bridge has no such API (an absent optional API is not a
    broken stack: MAX 25.3's max.torch is a torch.compile backend without CustomOpLibrary or graph_op, and
    25.4 has CustomOpLibrary but no graph_op)."""
    api = getattr(bridge, name, None)
    if api is None:
        raise Skip("MAX %s's %s has no %s" % (max_version(), bridge.__name__, name))
    return api


def max_version():
    try:
        from importlib import metadata

        return metadata.version("max")
    except Exception:
        return None


def _version_tuple(text):
    return tuple(int(part) for part in re.findall(r"\d+", text or "")[:2])


# Control-kernel generations (folders under kernels/) and the first MAX release each is written for,
# newest first. Each compiles on its releases only: the API moved in 26.2 (tensor types gained a
# static_spec parameter), 26.4 (extensibility, def, Coord), 26.5 (DeviceContext in max.gpu.host) and
# 26.7 (Mojo 1.x: closures with capture lists, foreach taking the function as an argument).
GENERATIONS = (
    ((26, 7), "mojo1"),
    ((26, 5), "max26.5"),
    ((26, 4), "max26.4"),
    ((26, 2), "max26.2"),
    ((0, 0), "legacy"),
)


def kernel_generations():
    """Control-kernel folders to try, the one written for the installed MAX first, then the others."""
    version = _version_tuple(max_version())
    names = [name for _, name in GENERATIONS]
    if not version:
        return tuple(names)
    matching = next(name for first, name in GENERATIONS if version >= first)
    return tuple([matching] + [name for name in names if name != matching])


def kernels_root(ctx):
    root = getattr(ctx.options, "kernels", None) or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels"
    )
    if not os.path.isdir(root):
        # Installed from a wheel: probes and kernels are siblings under gpudoctor/_data.
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "kernels")
    return os.path.abspath(root)


def add_kernel_arguments(parser):
    parser.add_argument("--kernels", help="folder holding the control kernel generations (default: ../kernels)")


def compile_diagnostics(text):
    """Every "file:line:col: error: ..." line of a Mojo compile failure, with the notes that follow."""
    lines = []
    for line in str(text).splitlines():
        if ": error:" in line or (lines and ": note:" in line):
            lines.append(line.strip())
    return lines


def first_compiler_error(text):
    """The first Mojo diagnostic line ("file:line:col: error: ...") in a compile failure."""
    diagnostics = compile_diagnostics(text)
    if diagnostics:
        return diagnostics[0]
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[0].strip() if lines else str(text)


def is_compile_error(error):
    name = type(error).__name__
    return name in ("MojoCompilationError", "PackageCompileError") or "error compiling mojo" in str(error).lower()


CACHE_DIR_ENV = "GPUDOCTOR_CACHE_DIR"
FAILED_BUILD = "compile-errors.txt"  # in a cache entry: the compiler rejected that content
BUILD_LOCK_WAIT_S = 300.0  # longer than any control build measured (35 s, cold, on the H100 beside 15 others)


class PackageCompileError(Exception):
    """``mojo`` rejected a package's source; the message is the compiler's output."""


def cache_dir():
    """Where gpudoctor keeps what can be reused between runs: $GPUDOCTOR_CACHE_DIR, else the XDG cache."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gpudoctor")


def _package_format():
    """(mojo subcommand, file suffix) MAX itself uses to build a source package: `precompile` and .mojoc
    from MAX 26.6 on (its `mojo package` insists on a .mojoc output), `package` and .mojopkg before."""
    version = _version_tuple(max_version())
    if version and version < (26, 6):
        return "package", ".mojopkg"
    return "precompile", ".mojoc"


def _package_key(source_dir, subcommand):
    """Content hash of a package's files, with the MAX and Mojo compiler versions that build it."""
    import hashlib
    from importlib import metadata

    digest = hashlib.sha256()
    for name in ("max", "max-core", "mojo-compiler"):
        try:
            version = metadata.version(name)
        except Exception:
            version = "-"
        digest.update(("%s=%s\n" % (name, version)).encode())
    digest.update(subcommand.encode() + b"\n")
    for folder, dirs, files in sorted(os.walk(source_dir)):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, source_dir).encode() + b"\0")
            with open(path, "rb") as handle:
                digest.update(handle.read())
            digest.update(b"\0")
    return digest.hexdigest()[:24]


def compiled_package(ctx, source_dir):
    """A compiled copy of the Mojo source package ``source_dir``, built once per content and compiler.

    Builds with the same bundled ``mojo`` and the same subcommand MAX's CustomOpLibrary runs on a
    source folder, into a private staging file that is renamed into place, so concurrent probes never
    see a half-written package. Returns None where this MAX has no way to run its bundled compiler or
    the cache cannot be written (the caller then hands MAX the source folder). Raises
    PackageCompileError with the compiler's output.
    """
    try:
        from mojo.run import subprocess_run_mojo
    except ImportError:
        return None
    subcommand, suffix = _package_format()
    package = os.path.basename(os.path.normpath(source_dir))
    entry = os.path.join(cache_dir(), "packages", _package_key(source_dir, subcommand))
    target = os.path.join(entry, package + suffix)
    if os.path.isfile(target):
        ctx.detail("control_package", "reused from the cache")
        return target
    try:
        os.makedirs(entry, exist_ok=True)
        lock = _build_lock(entry)
    except OSError as error:
        # An unwritable cache is no finding about the stack: MAX compiles the source folder instead.
        ctx.detail("control_package", "not cached (%s: %s); compiled from source" % (CACHE_DIR_ENV, error.strerror))
        return None
    try:
        if os.path.isfile(target):  # another run built it while this one waited for the lock
            ctx.detail("control_package", "reused from the cache (built by a run beside this one)")
            return target
        rejected = _rejected_before(entry, source_dir)
        if rejected is not None:
            # The compiler rejected this content with this compiler (a generation written for another MAX):
            # the same answer, without compiling it again in every run.
            raise PackageCompileError(rejected)
        return _build_package(ctx, subprocess_run_mojo, subcommand, source_dir, target)
    finally:
        os.close(lock)  # closing the descriptor releases the lock (so does the process's death)


def _build_lock(entry, wait_s=BUILD_LOCK_WAIT_S):
    """An open descriptor holding an exclusive lock on the cache entry's lock file, so that runs started
    together on a cold cache build the package once and the others wait for it (up to ``wait_s``; then each
    builds on its own, as before: a stuck build must not hang its neighbours)."""
    import fcntl
    import time

    descriptor = os.open(os.path.join(entry, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return descriptor
        except OSError:
            if time.monotonic() >= deadline:
                return descriptor  # not locked: building beside the other is safe (private staging, rename)
            time.sleep(0.05)


def _build_package(ctx, run_mojo, subcommand, source_dir, target):
    """``mojo SUBCOMMAND SOURCE_DIR`` into ``target`` in its cache entry: a private staging file renamed into
    place; where the compiler rejects the source, its answer is kept beside it (see _rejected_before)."""
    import shutil
    import subprocess
    import tempfile
    import time

    entry, name = os.path.split(target)
    # The compiler names the module after the output file, so the staging file has the final name.
    staging = tempfile.mkdtemp(prefix=".staging-", dir=entry)
    try:
        started = time.monotonic()
        completed = run_mojo(
            [subcommand, str(source_dir), "-o", os.path.join(staging, name)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        output = completed.stdout.decode("utf-8", "replace")
        if completed.returncode != 0:
            if compile_diagnostics(output):
                kept = os.path.join(staging, FAILED_BUILD)
                with open(kept, "w", encoding="utf-8") as handle:
                    handle.write(_source_line(source_dir) + output)
                os.replace(kept, os.path.join(entry, FAILED_BUILD))
                raise PackageCompileError(output)
            raise CheckFailed(
                "mojo %s of %s exited with %s: %s"
                % (subcommand, os.path.splitext(name)[0], completed.returncode, first_compiler_error(output))
            )
        os.replace(os.path.join(staging, name), target)
        ctx.detail("control_package", "built in %.1f s" % (time.monotonic() - started))
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _source_line(source_dir):
    return "source: %s\n" % os.path.abspath(source_dir)


def _rejected_before(entry, source_dir):
    """The compiler's output from an earlier build of this very folder that failed, or None. (The entry is keyed
    by content; the messages name the folder's path, so they are reused for the same folder only.)"""
    try:
        with open(os.path.join(entry, FAILED_BUILD), encoding="utf-8", errors="replace") as handle:
            first, _, output = handle.read().partition("\n")
    except OSError:
        return None
    return output if first + "\n" == _source_line(source_dir) else None


def _first_generation_that_compiles(ctx, package, how, build):
    """``build(source folder)`` for each control-kernel generation in turn, the installed MAX's first;
    the first result whose build compiles, with its generation recorded. A None result (nothing can be
    built this way here) is returned at once. A MAX for which no generation compiles is "unsupported by
    this probe" (a skip naming the compiler's first errors), not a failure of the user's stack."""
    root = kernels_root(ctx)
    errors = []
    for generation in kernel_generations():
        if not os.path.isdir(os.path.join(root, generation, package)):
            continue  # a kernels folder with fewer generations (a test's, or a user's --kernels)
        ctx.step("compile %s/%s %s" % (generation, package, how))
        try:
            result = build(os.path.join(root, generation, package))
        except Exception as error:
            if is_compile_error(error):
                errors.append("%s: %s" % (generation, first_compiler_error(error)))
                continue
            raise
        if result is not None:
            ctx.detail("kernel_generation", generation)
        return result
    raise Skip(
        "unsupported by this probe: no control-kernel generation compiles with MAX %s (%s)"
        % (max_version(), " | ".join(errors))
    )


def _cached_control(ctx, package):
    """The cached compiled control package, or None where nothing can be cached."""
    return _first_generation_that_compiles(
        ctx, package, "(or reuse it from the cache)", lambda source: compiled_package(ctx, source)
    )


def control_kernel(ctx, bridge, package="control"):
    """A path to hand MAX for the control package: the cached compiled package, or where nothing can be
    cached, the source folder of the generation CustomOpLibrary compiles."""
    compiled = _cached_control(ctx, package)
    if compiled is not None:
        return compiled
    _, path = load_control_library(ctx, bridge, package, from_source=True)
    return path


def load_control_library(ctx, bridge, package="control", from_source=False):
    """CustomOpLibrary over the control kernels of the first generation that compiles here.

    Returns (library, path). By default the library is loaded from the cached compiled package; with
    ``from_source``, or where nothing can be cached, MAX compiles the source folder itself, as users'
    code does, and path is that folder.
    """
    from pathlib import Path

    require_api(ctx, bridge, "CustomOpLibrary")
    if not from_source:
        compiled = _cached_control(ctx, package)
        if compiled is not None:
            ctx.step("load %s with CustomOpLibrary" % os.path.basename(compiled))
            return bridge.CustomOpLibrary(Path(compiled)), compiled
    return _first_generation_that_compiles(
        ctx, package, "with CustomOpLibrary", lambda source: (bridge.CustomOpLibrary(Path(source)), source)
    )


def torch_device(ctx):
    """The torch device string for this variant, after checking torch can use it."""
    import torch

    if ctx.device == "cuda":
        ctx.check(torch.cuda.is_available(), "torch.cuda.is_available() is False")
        return "cuda"
    return "cpu"


def expect_equal(ctx, actual, expected, what):
    """Compare two torch tensors exactly (small integers in float32), with a readable failure.

    On a GPU it synchronises first, so an asynchronous kernel failure surfaces here, in this step.
    """
    import torch

    if actual.is_cuda:
        ctx.step("synchronize before checking %s" % what)
        torch.cuda.synchronize()
    actual_cpu = actual.detach().to("cpu")
    expected_cpu = expected.detach().to("cpu")
    ctx.check(
        actual_cpu.shape == expected_cpu.shape and bool(torch.equal(actual_cpu, expected_cpu)),
        "%s: expected %s, got %s" % (what, expected_cpu.tolist(), actual_cpu.tolist()),
    )
