"""Where gpudoctor keeps what it reuses between runs, and Python bytecode when the environment turns its cache off.

With ``PYTHONDONTWRITEBYTECODE`` set (container images often set it, and install packages without ``.pyc``
files), every Python process compiles every module it imports from source: on the H100 machine this cost each
probe process about 4 s of ``import torch`` and the torch.compile probe 13 s of CPU, and the doctor's own start
0.24 s. Python can keep bytecode outside the source tree (``PYTHONPYCACHEPREFIX``, Python >= 3.8), which
honours what the variable is usually set for — nothing written into the installed packages — so, unless the
user chose a prefix themselves, the probes and the doctor keep theirs in gpudoctor's cache folder. Bytecode is
checked against its source's size and modification time on every import, so a cached file never stands in for
a changed module. Imports nothing heavy: the doctor calls it before its own imports.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from pathlib import Path

from gpudoctor.memo import CACHE_DIR_ENV as CACHE_DIR_ENV  # the folder is the memo's; named here as before
from gpudoctor.memo import cache_dir as cache_dir

NO_BYTECODE_ENV = "PYTHONDONTWRITEBYTECODE"
PYCACHE_PREFIX_ENV = "PYTHONPYCACHEPREFIX"
PYCACHE_FOLDER = "pycache"


def bytecode_prefix() -> Path:
    """The folder under which gpudoctor keeps bytecode that Python was told not to write beside the sources."""
    return cache_dir() / PYCACHE_FOLDER


def bytecode_turned_off(env: Mapping[str, str]) -> bool:
    """Whether ``env`` keeps Python from caching bytecode anywhere: ``PYTHONDONTWRITEBYTECODE`` set (to anything
    but the empty string, as Python reads it) and no ``PYTHONPYCACHEPREFIX`` chosen."""
    return bool(env.get(NO_BYTECODE_ENV)) and not env.get(PYCACHE_PREFIX_ENV)


def keep_probe_bytecode(env: MutableMapping[str, str]) -> None:
    """In a probe's environment: bytecode under gpudoctor's cache instead of none at all, only where the
    environment turned it off (``bytecode_turned_off``); otherwise the environment is left exactly as it is."""
    if not bytecode_turned_off(env):
        return
    env[PYCACHE_PREFIX_ENV] = str(bytecode_prefix())
    del env[NO_BYTECODE_ENV]


def keep_own_bytecode() -> None:
    """The same for the doctor's own process, called before it imports its modules (``python -B``, a choice made
    for this one command, is left alone)."""
    if not bytecode_turned_off(os.environ) or sys.pycache_prefix is not None:
        return
    try:
        prefix = str(bytecode_prefix())
    except RuntimeError:  # no home folder to put the cache in: compile as the environment asked
        return
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
