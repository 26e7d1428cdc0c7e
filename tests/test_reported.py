"""Issue 51: a pasted log's own versions are the reporter's environment; this machine's are never shown as theirs."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli

from gpudoctor.facts.reported import reported

COLLECT_ENV = """Collecting environment information...
PyTorch version: 2.1.0+cu121
Is debug build: False
CUDA used to build PyTorch: 12.1
Python version: 3.10.12 (main, Jun 11 2023, 05:26:28) [GCC 11.4.0] (64-bit runtime)
GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4090
Nvidia driver version: 535.104.05
Versions of relevant libraries:
[pip3] numpy==1.26.0
[pip3] triton==2.1.0
"""


def test_each_way_a_text_gives_versions_is_read() -> None:
    said = reported(COLLECT_ENV)
    assert said.packages == {"torch": "2.1.0+cu121", "numpy": "1.26.0", "triton": "2.1.0"}
    assert (said.torch_cuda, said.driver, said.gpu, said.python) == ("12.1", "535.104.05", "NVIDIA GeForce RTX 4090",
                                                                      "3.10.12")  # fmt: skip
    smi = reported("| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4 |\n"
                   "|   0  NVIDIA A100-SXM4-80GB          On  | 00000000:07:00.0 Off |\n")  # fmt: skip
    assert (smi.driver, smi.driver_cuda, smi.gpu) == ("550.54.15", "12.4", "NVIDIA A100-SXM4-80GB")
    pip = reported("Package    Version\n---------- -------\nnumba      0.59.1\ncupy-cuda12x 13.0.0\nrequests 2.31.0\n")
    assert pip.packages == {"numba": "0.59.1", "cupy-cuda12x": "13.0.0"}  # a package of no GPU stack is left out
    wheel = reported("Processing ./flash_attn-2.5.8+cu122torch2.3cxx11abiFALSE-cp310-cp310-linux_x86_64.whl")
    assert wheel.packages == {"flash-attn": "2.5.8+cu122torch2.3cxx11abiFALSE"}
    printed = reported(">>> print(torch.__version__)\n2.4.0+cu118\n>>> torch.__version__: 2.4.0+cu118")
    assert printed.packages["torch"] == "2.4.0+cu118" and printed.torch_cuda == "11.8"
    assert reported("RuntimeError: CUDA error: invalid argument\n").empty


def test_explain_says_the_logs_machine_not_this_one(tmp_path: Path) -> None:
    log = tmp_path / "issue.log"
    log.write_text(COLLECT_ENV + "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    lines = run_cli("explain", str(log), timeout=120).stdout.splitlines()
    assert lines[1].startswith("the log's machine, as its text gives it: torch 2.1.0+cu121 (CUDA 12.1), ")
    for fact in ("numpy 1.26.0", "triton 2.1.0", "driver 535.104.05", "NVIDIA GeForce RTX 4090", "Python 3.10.12"):
        assert fact in lines[1]
    assert "torch 2.13.0" not in "\n".join(lines)  # this machine's torch is not the reporter's
