"""The reporter's environment, as a pasted failure gives it: the versions its own text states — pip and conda lists,
torch's collect_env, nvidia-smi's header, printed ``__version__``s, a wheel's file name — so that `gpudoctor explain`
answers for the machine the log came from, never for the one it is read on. Pure: text in, facts out.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

MAX_LINES = 20_000
# The packages whose release decides a GPU stack's failures; others a list names are left out.
WATCHED = ("torch", "triton", "pytorch-triton", "max", "mojo", "modular", "cupy", "cupy-cuda11x", "cupy-cuda12x",
           "cupy-cuda13x", "numba", "numba-cuda", "cuda-python", "cuda-bindings", "cuda-core", "numpy", "jax",
           "jaxlib", "flash-attn", "flash_attn", "xformers", "vllm", "bitsandbytes", "transformers",
           "torchvision", "torchaudio", "tensorflow", "nvidia-cudnn-cu12", "nvidia-cuda-runtime-cu12",
           "nvidia-nvjitlink-cu12", "pycuda")  # fmt: skip
_VERSION = r"(?P<version>\d+(?:\.\d+){1,3}(?:[.+-]?[A-Za-z0-9]+)*)"
_NAME = r"(?P<name>[A-Za-z][\w.-]*)"
_PIN = re.compile(rf"^\s*{_NAME}\s*==\s*{_VERSION}\s*$")  # pip freeze
_TABLE = re.compile(rf"^\s*{_NAME}\s+{_VERSION}(?:\s+\S+){{0,3}}\s*$")  # pip list, conda list
_WHEEL = re.compile(
    r"\b(?P<name>[A-Za-z][\w.]*)-(?P<version>\d+(?:\.\d+){1,3}(?:\+[\w.]+)?)-(?:cp|py)\d+[\w.-]*\.whl\b"
)
_DUNDER = re.compile(rf"\b(?P<name>[A-Za-z][\w.]*)\.__version__\W{{1,6}}{_VERSION}")
_COLLECT = {
    "torch": re.compile(rf"^PyTorch version:\s*{_VERSION}", re.M),
    "triton": re.compile(rf"^\[(?:pip3|conda)\]\s*(?:pytorch-)?triton\s*[= ]=?\s*{_VERSION}", re.M),
}
_TORCH_CUDA = re.compile(r"^(?:CUDA used to build PyTorch|torch\.version\.cuda\W+)\s*:?\s*(?P<cuda>\d+\.\d+)", re.M)
_SMI = re.compile(r"Driver Version:\s*(?P<driver>\d+(?:\.\d+)+)\s+CUDA Version:\s*(?P<cuda>\d+\.\d+)")
_DRIVER = re.compile(r"^Nvidia driver version:\s*(?P<driver>\d+(?:\.\d+)+)", re.M)
_GPU = re.compile(
    r"^GPU(?: models and configuration:)?\s*(?:GPU\s*)?0?:?\s*(?P<gpu>NVIDIA [^\n(|]+?)\s*(?:\(|\||$)", re.M
)
_SMI_GPU = re.compile(r"^\|\s*\d+\s+(?P<gpu>NVIDIA [^|]+?|Tesla [^|]+?)\s+(?:On|Off)\s*\|", re.M)
_PYTHON = re.compile(r"^Python version:\s*(?P<python>3\.\d+(?:\.\d+)?)", re.M)


@dataclass(frozen=True)
class Reported:
    """What the text states of the reporter's machine; empty where it states nothing."""

    packages: dict[str, str] = field(default_factory=dict)
    driver: str | None = None
    driver_cuda: str | None = None
    torch_cuda: str | None = None
    gpu: str | None = None
    python: str | None = None

    @property
    def empty(self) -> bool:
        return not (self.packages or self.driver or self.driver_cuda or self.torch_cuda or self.gpu or self.python)

    def lines(self) -> list[str]:
        """The facts, in a reader's order ("torch 2.1.0+cu121 (CUDA 12.1)", "driver 535.104.05 (CUDA 12.2)", ...)."""
        found = []
        for name, version in self.packages.items():
            cuda = f" (CUDA {self.torch_cuda})" if name == "torch" and self.torch_cuda else ""
            found.append(f"{name} {version}{cuda}")
        if self.driver or self.driver_cuda:
            cuda = f" (CUDA {self.driver_cuda})" if self.driver_cuda else ""
            found.append(f"driver {self.driver or '?'}{cuda}")
        if self.gpu:
            found.append(self.gpu)
        if self.python:
            found.append(f"Python {self.python}")
        return found


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-")


@functools.lru_cache(maxsize=8)  # every entry's texts ask for the same log's facts
def reported(text: str) -> Reported:
    """The reporter's environment as ``text`` states it."""
    lines = text.splitlines()[:MAX_LINES]
    packages: dict[str, str] = {}
    watched = {_canonical(w) for w in WATCHED}

    def seen(name: str, version: str) -> None:
        key = _canonical(name).removeprefix("pytorch-") if _canonical(name) != "pytorch-triton" else "triton"
        if key in watched or _canonical(name) in watched:
            packages.setdefault(key, version)

    for name, pattern in _COLLECT.items():
        if (match := pattern.search(text)) is not None:
            packages.setdefault(name, match["version"])
    for line in lines:
        line = re.sub(r"^\s*\[(?:pip\d?|conda)\]\s*", "", line)  # collect_env's "[pip3] numpy==1.26.0"
        for pattern in (_PIN, _TABLE):
            if (match := pattern.match(line)) is not None:
                seen(match["name"], match["version"])
        for match in _WHEEL.finditer(line):
            seen(match["name"], match["version"])
        for match in _DUNDER.finditer(line):
            seen(match["name"].split(".")[0], match["version"])
    smi = _SMI.search(text)
    driver = _DRIVER.search(text)
    gpu = _GPU.search(text) or _SMI_GPU.search(text)
    torch_cuda = _TORCH_CUDA.search(text)
    cuda_of_build = torch_cuda["cuda"] if torch_cuda else None
    if cuda_of_build is None and (cu := re.search(r"\+cu(\d+)(\d)$", packages.get("torch", ""))):
        cuda_of_build = f"{cu[1]}.{cu[2]}"  # a wheel's local version: +cu121 is CUDA 12.1
    python = _PYTHON.search(text)
    return Reported(
        packages=packages,
        driver=smi["driver"] if smi else (driver["driver"] if driver else None),
        driver_cuda=smi["cuda"] if smi else None,
        torch_cuda=cuda_of_build,
        gpu=gpu["gpu"].strip() if gpu else None,
        python=python["python"] if python else None,
    )
