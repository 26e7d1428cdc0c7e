"""Issue 51: a component named only by its own name in the line that says what failed ("ptxas failed with error
code 1", "modular: error: ...", "Failed to start NVIDIA Docker plugin") is that component — read last, where no status,
tool line, frame, exception or message names one and no frame of the user's own raised it — and its usual phase is not
guessed from it. A tool that says where its reason is written gets that as the step; pip's warning that an install
broke another package's declared requirement gets what the requirement declares; and the classes heldout19's and
heldout20's judged misses showed (a process the system killed, a refused permission, a call of another release, NCCL's
optional plugin, an apt pin, a torch without NCCL, ...). Made-up texts of the fields' shapes."""

from __future__ import annotations

import dataclasses

import pytest
from test_field_corpus import H100

from gpudoctor.knowledge import match_findings
from gpudoctor.knowledge.answer import UNNAMED, Answer, answer
from gpudoctor.knowledge.load import load_knowledge
from gpudoctor.knowledge.public import load_corpus, names
from gpudoctor.knowledge.reading import held_error, read
from gpudoctor.knowledge.vocabulary import load_vocabulary
from gpudoctor.model import Device, Outcome, ProbeResult, Report
from gpudoctor.protocol import LOG_RUN_ID

KNOWLEDGE = load_knowledge()
VOCABULARY = load_vocabulary()
EMPTY = dataclasses.replace(H100.environment, packages={})


def _result(text: str) -> ProbeResult:
    return ProbeResult(id=LOG_RUN_ID, probe=LOG_RUN_ID, device=Device.NONE, outcome=Outcome.FAIL, duration_s=1.0,
                       stderr_tail=text, command="python train.py")  # fmt: skip


def _answer(text: str) -> Answer:
    return answer(_result(text), text, EMPTY, KNOWLEDGE)


def _report(text: str) -> Report:
    return Report(doctor_version="0", created="", environment=EMPTY, results=(_result(text),))


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


def test_an_installed_file_a_failing_line_names_is_its_packages() -> None:
    text = (
        "ImportError: /opt/venv/lib/python3.10/site-packages/fancy_op/_C.cpython-310-x86_64-linux-gnu.so: cannot open\n"
    )
    reading = read(text, VOCABULARY)
    assert reading.package == "fancy_op" and reading.component is None and not reading.named
    torch_lib = (
        "OSError: /opt/venv/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclFoo\n"
    )
    assert (found := read(torch_lib, VOCABULARY).component) is not None and found.id == "torch"  # its frame mark's


@pytest.mark.parametrize(
    "text",
    [
        "error: command '/usr/local/cuda-12.4/bin/nvcc' failed with exit status 137\n",
        "run.sh: line 7:  4242 Killed                  python train.py\n",
    ],
)
def test_a_process_the_system_killed_gets_the_oom_killers_log(text: str) -> None:
    said = _answer(text)
    assert said.experiment.startswith("dmesg | grep -iE 'killed process|out of memory'"), said
    assert "SIGKILL: exit status 137 is 128 + 9" in said.means


@pytest.mark.parametrize(
    "text",
    [
        "RuntimeError: open(/rendezvous-file): Permission denied\n",
        "nvidia-docker | 2017/06/02 17:35:05 Error: nvml: Insufficient Permissions\n",
        "docker: Got permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock\n",
    ],
)
def test_a_refused_permission_gets_the_run_as_root_once_experiment(text: str) -> None:
    said = _answer(text)
    assert said.experiment.startswith("the same command once as root (sudo): passing there puts the cause"), said
    assert "the process was refused a right it needs" in said.means


@pytest.mark.parametrize(
    "text",
    [
        "node1:1:1 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or "
        "directory No plugin found (libnccl-net.so), using internal implementation\n",
        "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n",
    ],
)
def test_ncclss_notice_of_an_absent_optional_plugin_is_not_a_missing_library(text: str) -> None:
    findings = match_findings(_report(text))
    assert "shared-library-not-found" not in {f.id for f in findings}  # no CUDA library to install
    said = _answer(text)
    assert said.component.startswith("NCCL") and "it is information, not the failure" in said.means
    assert said.experiment.startswith("the first NCCL WARN line or error after it")


def test_a_json_error_report_cut_after_its_message_does_not_hold_its_error() -> None:
    cut = (
        "ERROR:torch.distributed.elastic.multiprocessing.errors.error_handler:{\n"
        '  "message": {\n'
        '    "message": "RuntimeError: Address family not supported by protocol",\n'
    )
    assert held_error(cut) is None  # what raised it is in the part not pasted (its extraInfo's traceback)
    assert "whole output" in _answer(cut).experiment


def test_a_folder_that_is_not_there_is_not_a_header_that_is_not_there() -> None:
    folder = ["cp: /opt/venv/lib/python3.7/site-packages/torch/lib/include/THC: No such file or directory"]
    assert names(folder) == {"thc"} and names(["THC/THC.h: No such file or directory"]) == {"thc.h"}
    assert not [r for _, r in load_corpus().nearest(folder) if "THC.h" in r.error]  # the header's threads: not this


@pytest.mark.parametrize(
    ("text", "callee"),
    [
        ("TypeError: Launcher._run_kernel() takes 3 positional arguments but 4 were given\n", "Launcher._run_kernel"),
        ("TypeError: JITFunction.run() missing 1 required keyword-only argument: 'grid'\n", "JITFunction.run"),
        ("TypeError: load() got an unexpected keyword argument 'extra_cuda_cflags'\n", "load"),
    ],
)
def test_a_call_a_signature_does_not_take_is_a_release_question(text: str, callee: str) -> None:
    said = _answer(text)
    assert said.means.startswith(f"{callee}() was called with arguments it does not take"), said
    assert said.experiment.startswith(f"which package defines {callee} and its release")


def test_a_relative_path_that_is_not_there_is_read_from_the_working_folder() -> None:
    said = _answer("FileNotFoundError: [Errno 2] No such file or directory: 'csrc/ops/fused_adam.cu'\n")
    assert said.experiment.startswith("ls csrc/ops/fused_adam.cu from the folder you run the command in")
    # an absolute path, or a bare program's name (a command not found), is not this
    for other in ("FileNotFoundError: [Errno 2] No such file or directory: '/opt/data/x.bin'\n",
                  "FileNotFoundError: [Errno 2] No such file or directory: 'nvcc': 'nvcc'\n"):  # fmt: skip
        assert "from the folder you run the command in" not in _answer(other).experiment


def test_cudas_own_words_for_error_803_are_the_driver_library_mismatch_without_its_number() -> None:
    text = "vabackend.c: 168 init CUDA ERROR 'system has unsupported display driver / cuda driver combination'\n"
    assert "nvml-driver-library-mismatch" in {f.id for f in match_findings(_report(text))}


def test_a_stale_file_handle_puts_the_cache_on_a_network_file_system() -> None:
    said = _answer("OSError: [Errno 116] Stale file handle: '/home/u/.triton/cache/8f3a/cuda_utils.so'\n")
    assert said.experiment.startswith("df -T on the folder the line names (nfs, lustre, gpfs: a network file system)")
    assert "TRITON_CACHE_DIR=/tmp/triton_cache" in said.experiment


def test_an_apparmor_denial_is_a_refused_permission_and_a_tools_check_your_is_its_statement() -> None:
    denial = (
        'audit: type=1400 apparmor="DENIED" operation="open" profile="/usr/sbin/x" name="/dev/nvidiactl" comm="x"\n'
    )
    assert _answer(denial).experiment.startswith("the same command once as root (sudo)")
    said = _answer("  -> Cannot link libraries: ['cublas']\n  -> Check your LDFLAGS environment variable.\n").said
    assert said == "Check your LDFLAGS environment variable."


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ("E: Version '12.4.1-1' for 'cuda-toolkit-12-4' was not found\n", "apt-cache madison cuda-toolkit-12-4"),
        (
            "RuntimeError: Distributed package doesn't have NCCL built in\n",
            'python -c "import torch, torch.distributed',
        ),
        ("OSError: [WinError -529697949] Windows Error 0xe06d7363\n", "the library's own log or error callback"),
        (
            "Fatal Python error: PyGILState_Release: the function must be called with the GIL held, but the GIL is "
            "released\n",
            "python -X faulthandler",
        ),
        (
            "dyld: Symbol not found: _objc_msgSend$foo\n  Referenced from: /usr/local/bin/tool (which was built for "
            "Mac OS X 14.0)\n  Expected in: /usr/lib/libobjc.A.dylib\n",
            "sw_vers (this macOS) against the binary's minimum",
        ),
        (
            "F0101 00:00:01.000000 1 nccl.cpp:10] Check failed: result == ncclSuccess (2 vs. 0) system error\n"
            " *** Check failure stack trace: ***\n",
            "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET",
        ),
    ],
)
def test_heldout20s_classes_get_their_own_step(text: str, start: str) -> None:
    assert _answer(text).experiment.startswith(start), _answer(text)


@pytest.mark.parametrize(
    "text",
    ["CUDA access violation reading", "Install PyCUDA to use CUDA processing", "ResolvePackageNotFound: - nccl=2.12\n"],
)
def test_a_title_or_a_package_managers_refusal_is_a_failure_not_nothing(text: str) -> None:
    assert _answer(text).component is not None  # answered (the generic reading at worst), never "no failure"
    assert {f.id for f in match_findings(_report(text))}
