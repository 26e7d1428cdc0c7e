"""Where compute-sanitizer is: the CUDA toolkit's (CUDA_HOME, then PATH, then /usr/local/cuda), else the executable
pip's nvidia-cuda-sanitizer-api wheels ship in the examined interpreter's site-packages (the ``sanitizer`` extra).
Nothing is run. A fact of the inventory, and what the instruments' reruns start."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from gpudoctor.stackfacts import Sanitizer

EXECUTABLE = "compute-sanitizer"
# pip's wheels: nvidia-cuda-sanitizer-api-cu12 (CUDA 12) and nvidia-cuda-sanitizer-api (CUDA 13) both unpack here
WHEEL_BIN = Path("nvidia") / "cuda_sanitizer_api" / "bin"


def _runnable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_sanitizer(env: Mapping[str, str], site_packages: Sequence[Path] = ()) -> Sanitizer | None:
    """The compute-sanitizer a rerun would use, or None."""
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    if home and _runnable(candidate := Path(home) / "bin" / EXECUTABLE):
        return Sanitizer(str(candidate), "CUDA_HOME")
    if on_path := shutil.which(EXECUTABLE, path=env.get("PATH", "")):
        return Sanitizer(on_path, "PATH")
    if _runnable(candidate := Path("/usr/local/cuda/bin") / EXECUTABLE):
        return Sanitizer(str(candidate), "/usr/local/cuda")
    for folder in site_packages:
        if _runnable(candidate := folder / WHEEL_BIN / EXECUTABLE):
            return Sanitizer(str(candidate), "pip wheel")
    return None
