"""Where the cpp-extension probe keeps its build: a folder in gpudoctor's cache per key of everything that decides
what is built (gpudoctor, this probe's sources, Python, torch, the toolkit, the compilers, the arch list), locked.

ninja alone would not notice a new compiler or nvcc behind the same path (it compares the build's commands and
file times), so each of those is in the key and a change gives a new folder: never a stale load, never a stale
failure either (a failed build leaves no library, so the next run builds again). Standard library only;
compatible with Python 3.8.
"""

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig

from _maxsupport import cache_dir

# Set by the doctor for its probes (gpudoctor.suite.caches.probe_environment); absent when run by hand.
VERSION_ENV = "GPUDOCTOR_VERSION"
# Variables nvcc itself reads: each changes what it compiles without changing cpp_extension's build file.
NVCC_ENV = ("NVCC_CCBIN", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "CUDAHOSTCXX")
VERSION_TIMEOUT_S = 60
CPP_EXTENSION_BATON = "lock"  # torch.utils.cpp_extension's FileBaton, in the build folder
# Builds kept per variant (about 1.3 MB each for the cpu one): a sweep over torch releases makes one per cell.
KEPT_BUILDS = 16


def tool_identity(command):
    """Where ``command`` resolves and the first line of its ``--version``; what went wrong instead, for a tool
    that is missing or fails (the build then fails in cpp_extension, as the user's does)."""
    path = shutil.which(command)
    if path is None:
        return "%s: not found" % command
    try:
        completed = subprocess.run(
            [path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            timeout=VERSION_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return "%s: %s" % (path, error)
    lines = completed.stdout.decode("utf-8", "replace").strip().splitlines()
    # nvcc names its release on the last line but one ("Cuda compilation tools, release 13.0, V13.0.88").
    named = [line for line in lines if "release" in line.lower()] or lines[:1]
    return "%s: %s (exit %d)" % (os.path.realpath(path), named[0] if named else "", completed.returncode)


def _cuda_arch(torch):
    """What cpp_extension builds for: TORCH_CUDA_ARCH_LIST, else the visible GPUs' compute capabilities."""
    chosen = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if chosen:
        return "TORCH_CUDA_ARCH_LIST=" + chosen
    try:
        count = torch.cuda.device_count()
        return "gpus=" + ",".join("%d.%d" % torch.cuda.get_device_capability(i) for i in range(count))
    except Exception as error:  # cpp_extension meets the same failure when it asks, and reports it
        return "gpus: %s" % error


def build_key(cpp_extension, cuda, probe_file):
    """(key, inputs): the inputs that decide what the build makes and the digest of them that names its folder.
    ``probe_file`` is the probe's script, which holds the sources and how they are built."""
    import torch

    sources = hashlib.sha256()
    for path in (probe_file, __file__):
        with open(path, "rb") as handle:
            sources.update(handle.read())
    inputs = {
        "gpudoctor": os.environ.get(VERSION_ENV, "-"),
        "probe_sources": sources.hexdigest()[:16],
        "python": "%s %s" % (sys.version.split()[0], sysconfig.get_config_var("EXT_SUFFIX")),
        "torch": "%s %s" % (torch.__version__, getattr(torch.version, "git_version", "")),
        "torch_cuda": str(torch.version.cuda),
        "cxx": tool_identity(os.environ.get("CXX") or "c++"),
        "cflags": os.environ.get("CFLAGS", ""),
    }
    if cuda:
        home = cpp_extension.CUDA_HOME
        inputs["cuda_home"] = str(home)
        inputs["nvcc"] = tool_identity(os.path.join(home, "bin", "nvcc")) if home else "no CUDA_HOME"
        # cpp_extension hands nvcc $CC as its host compiler (-ccbin); without it, nvcc runs gcc from PATH.
        inputs["nvcc_host_compiler"] = tool_identity(os.environ.get("CC") or "gcc")
        inputs["nvcc_env"] = " ".join("%s=%s" % (name, os.environ[name]) for name in NVCC_ENV if name in os.environ)
        inputs["cuda_arch"] = _cuda_arch(torch)
    text = json.dumps(inputs, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16], inputs


@contextlib.contextmanager
def locked_build_folder(variant, key):
    """The build folder for ``variant`` under ``key``, held exclusively while the block runs.

    The lock is the kernel's (flock), released when its holder dies: a second run (another doctor, a sweep cell)
    waits for the first to finish building, then only loads. cpp_extension's own lock is a file it deletes when
    done, so a build killed midway (a timeout, ^C) leaves it behind and every later build waits on it forever;
    while this lock is held nobody else builds here, so such a file is left over and is removed.
    """
    import fcntl

    root = os.path.join(cache_dir(), "cpp-extension")
    folder = os.path.join(root, "%s-%s" % (variant, key))
    lock = folder + ".lock"
    if not os.path.isdir(root):
        os.makedirs(root, exist_ok=True)
    while True:
        handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:  # a run pruning this build removes the lock file after its folder: then take the new one
            if os.fstat(handle).st_ino == os.stat(lock).st_ino:
                break
        except OSError:
            pass
        os.close(handle)
    try:
        os.utime(lock)  # when this build was last used, for pruning
        if not os.path.isdir(folder):
            os.makedirs(folder, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(folder, CPP_EXTENSION_BATON))
        yield folder
    finally:
        os.close(handle)
    try:
        _prune(root, variant)
    except OSError:  # the build served the run; keeping too many old ones is no failure of it
        pass


def _prune(root, variant):
    """Remove all but the KEPT_BUILDS most recently used builds of ``variant``, skipping any in use."""
    import fcntl

    def last_used(lock):
        try:
            return os.stat(lock).st_mtime
        except OSError:
            return 0.0

    prefix = variant + "-"
    names = [name for name in os.listdir(root) if name.startswith(prefix) and name.endswith(".lock")]
    locks = [os.path.join(root, name) for name in names]
    for lock in sorted(locks, key=last_used, reverse=True)[KEPT_BUILDS:]:
        try:
            handle = os.open(lock, os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(lock[: -len(".lock")], ignore_errors=True)
            os.remove(lock)
        except OSError:  # in use by another run, or already gone
            pass
        finally:
            os.close(handle)


def write_if_changed(path, text):
    """Write ``text`` to ``path`` unless it already holds it (a rewrite would make ninja build it again)."""
    data = text.encode()
    try:
        with open(path, "rb") as existing:
            if existing.read() == data:
                return path
    except OSError:
        pass
    staging = "%s.%d.tmp" % (path, os.getpid())
    with open(staging, "wb") as handle:
        handle.write(data)
    os.replace(staging, path)
    return path
