"""Scratch folders under the temporary folder, held while in use and removed after, and — since a process killed with
SIGKILL (a Ray node removed, an OOM kill) cannot remove its own — removed by a later run once nothing holds them.

A folder is held by an flock on a file inside it, which the kernel releases when its holder dies however it dies;
a later run removes the folders of this user that nobody holds and that are older than a setting-up moment.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

PREFIX = "gpudoctor-"
HELD_BY = ".gpudoctor-in-use"  # the file whose flock says a live process is using the folder
SETTING_UP_S = 60.0  # a younger folder may be one whose maker has not taken its lock yet: never removed


@contextlib.contextmanager
def scratch_folder(prefix: str = PREFIX) -> Iterator[Path]:
    """A new private folder under the temporary folder, held while the block runs, removed with all it holds after."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    held = os.open(folder / HELD_BY, os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(held)


def remove_abandoned(temp_dir: Path | None = None, setting_up_s: float = SETTING_UP_S) -> list[Path]:
    """Remove the scratch folders a killed run left: this user's, held by nobody, older than ``setting_up_s``;
    folders without the lock file (another program's, or an older gpudoctor's) are left alone. What was removed."""
    removed = []
    now = time.time()
    for folder in Path(temp_dir or tempfile.gettempdir()).glob(PREFIX + "*"):
        with contextlib.suppress(OSError):
            found = folder.lstat()
            if not folder.is_dir() or folder.is_symlink() or found.st_uid != os.getuid():
                continue
            if now - found.st_mtime < setting_up_s:
                continue
            held = os.open(folder / HELD_BY, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # OSError (would block): in use
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(folder)
            finally:
                os.close(held)
    return removed
