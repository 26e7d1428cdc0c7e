"""Issue 51: a component named only by its own name in the line that says what failed ("ptxas failed with error
code 1", "modular: error: ...", "Failed to start NVIDIA Docker plugin") is that component — read last, where no status,
tool line, frame, exception or message names one and no frame of the user's own raised it — and its usual phase is not
guessed from it. A tool that says where its reason is written gets that as the step; pip's warning that an install
broke another package's declared requirement gets what the requirement declares. Made-up texts of the fields' shapes."""

from __future__ import annotations

import dataclasses

import pytest
from test_field_corpus import H100

from gpudoctor.knowledge.answer import UNNAMED, Answer, answer
from gpudoctor.knowledge.load import load_knowledge
from gpudoctor.knowledge.reading import read
from gpudoctor.knowledge.vocabulary import load_vocabulary
from gpudoctor.model import Device, Outcome, ProbeResult
from gpudoctor.protocol import LOG_RUN_ID

KNOWLEDGE = load_knowledge()
VOCABULARY = load_vocabulary()
EMPTY = dataclasses.replace(H100.environment, packages={})


def _answer(text: str) -> Answer:
    result = ProbeResult(id=LOG_RUN_ID, probe=LOG_RUN_ID, device=Device.NONE, outcome=Outcome.FAIL, duration_s=1.0,
                         stderr_tail=text, command="python train.py")  # fmt: skip
    return answer(result, text, EMPTY, KNOWLEDGE)


@pytest.mark.parametrize(
    ("text", "component"),
    [
        ("RuntimeError: ptxas failed with error code 3 (CUDA)\n", "ptxas"),
        ("modular: error: could not fetch the package index\n", "mojo"),
        ("Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels\n", "nccl"),
        (
            "[drm:nv_drm_master_set [nvidia_drm]] *ERROR* [nvidia-drm] [GPU ID 0x00000200] failed to grab master\n",
            "cuda-driver",
        ),
        ("RuntimeError: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`\n", "cuda-libraries"),
        ("docker: unknown flag: --gpus\nSee 'docker run --help'.\n", "container-toolkit"),
        ("gcc: error trying to exec 'cc1plus': execvp: No such file or directory\n", "host-compiler"),
        ("AttributeError: module 'cupy' has no attribute 'cuda'\n", "cupy"),
        (
            "RuntimeError: Default process group has not been initialized, please make sure to call "
            "init_process_group.\n",
            "torch",
        ),
    ],
)
def test_a_failing_line_names_its_component_by_its_own_name(text: str, component: str) -> None:
    reading = read(text, VOCABULARY)
    assert reading.component is not None and reading.component.id == component and reading.named, reading
    assert _answer(text).component != UNNAMED


def test_a_name_does_not_override_stronger_evidence_or_the_users_own_frame() -> None:
    inside = ('  File "/opt/venv/lib/python3.11/site-packages/triton/compiler/compiler.py", line 90, in compile\n'
              "RuntimeError: failed to talk to nccl\n")  # fmt: skip
    reading = read("Traceback (most recent call last):\n" + inside, VOCABULARY)
    assert reading.component is not None and reading.component.id == "triton" and not reading.named  # the frame's
    own = 'Traceback (most recent call last):\n  File "/home/u/t.py", line 3, in <module>\nValueError: torch wants 2\n'
    assert read(own, VOCABULARY).component is None  # the user's own frame raised it: "your program", not torch
    assert _answer(own).component.startswith("your program (t.py:3)")
    # a dtype in a cache key is not PyTorch failing (Triton's launcher keys its kernels by them)
    key = "KeyError: ('2-.-0-.-0-d825', (torch.float32, torch.float32, dtype('float64'), 'fp32'), (128,))\n"
    assert read(key, VOCABULARY).component is None


def test_a_component_named_by_its_name_alone_gets_no_guessed_phase() -> None:
    # the container toolkit's usual phase is "load"; a service's start says no such thing
    said = _answer("nvidia-docker | 2019/03/02 22:27:16 Error: failed to run docker command\n")
    assert said.component.startswith("the NVIDIA container toolkit") and said.phase_id == "unknown"
    assert "ldd -r" not in said.experiment
    assert "the NVIDIA container toolkit's newest release" in said.experiment  # the text holds its error


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "Job for nvidia-persistenced.service failed because the control process exited with error code. See "
            '"systemctl status nvidia-persistenced.service" and "journalctl -xe" for details.\n',
            '"systemctl status nvidia-persistenced.service" and "journalctl -xe"',
        ),
        (
            "ERROR: Installation has failed.  Please see the file '/var/log/nvidia-installer.log' for details.\n",
            "/var/log/nvidia-installer.log",
        ),
        (
            "Error! Bad return status for module build on kernel: 6.8.0-45-generic (x86_64)\n"
            "Consult /var/lib/dkms/nvidia/550.107.02/build/make.log for more information.\n",
            "/var/lib/dkms/nvidia/550.107.02/build/make.log",
        ),
        ("Failed to communicate with NVIDIA driver. See more details in the logs\n", "the logs"),
    ],
)
def test_a_tool_that_says_where_its_reason_is_written_gets_that_as_the_step(text: str, where: str) -> None:
    said = _answer(text)
    assert said.experiment.startswith(f"what it points to, first: {where} — the first error written there"), said
    assert "whole output" not in said.experiment


@pytest.mark.parametrize(
    "text",
    [
        "ERROR: torch 2.3.1 has requirement triton==2.3.1, but you'll have triton 3.0.0 which is incompatible.\n",
        'torch 2.3.1 requires triton==2.3.1; platform_system == "Linux", but you have triton 3.0.0 which is '
        "incompatible.\n",
    ],
)
def test_pips_broken_requirement_gets_what_the_requirement_declares(text: str) -> None:
    said = _answer(text)
    assert said.experiment.startswith("pip check (every declared requirement this environment breaks); then give torch")
    assert "pip install 'triton==2.3.1'" in said.experiment
    assert "pip left triton 3.0.0 in the environment, which torch 2.3.1 does not accept" in said.means


def test_a_tools_own_make_sure_is_its_statement() -> None:
    said = _answer("RuntimeError: Default process group has not been initialized, please make sure to call "
                   "init_process_group.\n")  # fmt: skip
    assert said.said == "please make sure to call init_process_group."
