"""Issue 51: the kinds of miss `gpudoctor explain` made on fresh public reports, each with a made-up text of the same
shape (none from the reserved threads or the held-out sets): the raising tool's own statement used first, no "no
failure" for a failure in its own tools' words, compute-sanitizer's pasted records read as a run's are, and a common
error's public reports never turned into one cause."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

from gpudoctor.report.codec import decode


def _explain(tmp_path: Path, text: str) -> tuple[str, dict[str, object]]:
    log = tmp_path / "job.log"
    log.write_text(text)
    plain = run_cli("explain", str(log), timeout=120).stdout
    return plain, json.loads(run_cli("explain", "--json", str(log), timeout=120).stdout)


def test_the_tools_own_statement_of_the_remedy_comes_first(tmp_path: Path) -> None:
    text = ("Traceback (most recent call last):\n  File \"/srv/app/run.py\", line 12, in <module>\n"
            "    launch(x)\nRuntimeError: the fused kernel is only applicable on compute capability 9.0 and above; "
            "your device is 8.6\n")  # fmt: skip
    plain, _ = _explain(tmp_path, text)
    assert 'it says itself: "RuntimeError: the fused kernel is only applicable on compute capability 9.0' in plain
    assert "fix: First what" in plain and "itself says" in plain


def test_a_failure_in_its_own_tools_words_is_never_no_failure(tmp_path: Path) -> None:
    for text in (
        "[ 4412.1] NVRM: Xid (PCI:0000:17:00): 48, pid=2210, name=python, An uncorrectable double bit error\n",
        "[ 9.8] NVRM: GPU 0000:3b:00.0: RmInitAdapter failed! (0x62:0x55:2477)\n",
        "kernel: NVRM: GPU1 kgspBootGspRm: GSP-RM boot failed\n",
        "demo.mojo:14:5: note: constraint failed: this kernel needs a GPU with tensor cores\n",
        "ninja: build stopped: subcommand failed.\n",
        "========= Invalid __shared__ write of size 4 bytes\n=========     at scan_block+0x90\n",
    ):
        _, report = _explain(tmp_path, text)
        run = report["results"][0]  # type: ignore[index]
        assert run["outcome"] == "fail", text
        assert "no failure found" not in run["summary"], text


def test_compute_sanitizers_pasted_records_name_kernel_and_access(tmp_path: Path) -> None:
    text = ("========= COMPUTE-SANITIZER\n========= Invalid __global__ read of size 4 bytes\n"
            "=========     at gather_rows+0x1a0 in /src/k.cu:22\n=========     by thread (31,0,0) in block (1023,0,0)\n"
            "=========     Address 0x7f10 is out of bounds\n"
            "=========     and is 64 bytes after the nearest allocation at 0x7f00 of size 4,096 bytes\n"
            "========= ERROR SUMMARY: 1 error\n")  # fmt: skip
    _, document = _explain(tmp_path, text)
    report = decode(document)
    (lead,) = [f for f in report.findings if f.is_problem]
    assert any("kernel `gather_rows` (/src/k.cu:22) reads 4 bytes of global memory out of bounds" in e
               for e in lead.evidence), lead.evidence  # fmt: skip
    # a pytest banner of equals signs is no sanitizer record
    _, passed = _explain(tmp_path, "============ 12 passed in 3.1s ============\n")
    assert passed["results"][0]["outcome"] == "pass"  # type: ignore[index]


def test_a_common_errors_reports_are_never_read_as_one_cause(tmp_path: Path) -> None:
    # the words every faulting kernel's report carries end in many causes: where public reports of them show, they
    # show as candidates (several threads, whether their causes agree said), never as the one cause
    for text in ("RuntimeError: CUDA error: an illegal memory access was encountered",
                 "RuntimeError: CUDA error: device-side assert triggered"):  # fmt: skip
        _, findings = _said(tmp_path, text)
        public_ids = ("same-error-in-public-reports", "public-reports-of-the-same-error")
        for public in (f for f in findings if f["id"] in public_ids):
            evidence = public["evidence"]
            assert isinstance(evidence, list) and len(evidence) > 2, evidence
            assert "each a different one" in evidence[0] or "of them the same cause" in evidence[0], evidence


def _said(tmp_path: Path, text: str) -> tuple[str, list[dict[str, object]]]:
    plain, report = _explain(tmp_path, text)
    return plain, report["findings"]  # type: ignore[return-value]


def _ids(findings: list[dict[str, object]]) -> list[object]:
    return [f["id"] for f in findings]


def _each_read_as_failure(tmp_path: Path, cases: tuple[tuple[str, str], ...]) -> None:
    """Each text answered (never "no failure found"), its answer saying the words given beside it."""
    for text, said in cases:
        plain, _ = _said(tmp_path, text)
        assert "no failure found" not in plain and said in plain, (text, plain)


def _missing_name_is_no_release(tmp_path: Path, text: str, said: str) -> None:
    """A missing name the text itself explains (a stand-in's gap, an extension not built) is never a release to
    install."""
    plain, _ = _said(tmp_path, text)
    assert said in plain and "Install the release" not in plain, plain


def test_a_compilers_crash_is_its_compile_never_a_run_time_fault(tmp_path: Path) -> None:
    # an MLIR pass of Triton's that failed on an assertion in the compiler's own C++ source
    triton = ("kernel.py:31:0: error: Failures have been detected while processing an MLIR pass pipeline\n"
              "note: Pipeline failed while executing [`TritonGPUPipeline` on 'builtin.module' operation]\n"
              "/src/llvm/include/llvm/Support/Casting.h:566: Assertion `isa<To>(Val) && \"cast<Ty>() argument of "
              "incompatible type!\"' failed.\n")  # fmt: skip
    plain, _ = _said(tmp_path, triton)
    assert "Triton failed during jit-compile" in plain and "internal checks while compiling" in plain
    assert "compute-sanitizer" not in plain and "TRITON_REPRODUCER_PATH" in plain
    # Mojo's crash reporter, with the compiler's own frames and no word "error"
    mojo = ("#7 0x000055d1c2a1 M::KGEN::KGENCompiler::runKGENPipeline(mlir::ModuleOp) KGENCompiler.cpp:0:0\n"
            "#8 0x000055d1c2b0 main mojo.cpp:0:0\nmojo crashed!\nPlease file a bug report.\n")  # fmt: skip
    plain, _ = _said(tmp_path, mojo)
    assert "no failure found" not in plain
    assert "the Mojo toolchain (MAX) failed during jit-compile" in plain and "TRITON_" not in plain
    # NVRTC's error in a header a library ships: the kernel's compile, NVRTC's words, called from CuPy
    nvrtc = ('  File "cupy/_core/raw.pyx", line 377, in cupy._core.raw.RawModule.get_function\n'
             "cupy.cuda.compiler.CompileException: /site-packages/cupy/_core/include/cupy/complex.h(94): error: "
             "incomplete type is not allowed\n"
             '1 error detected in the compilation of "/tmp/tmpab12/kern.cu".\n')  # fmt: skip
    plain, _ = _said(tmp_path, nvrtc)
    assert "NVRTC (CUDA's runtime compiler), called from CuPy" in plain and "during jit-compile" in plain
    # numba-cuda's IR refused by libNVVM
    nvvm = (
        '  File "/env/lib/python3.10/site-packages/numba/cuda/cudadrv/nvvm.py", line 270, in compile\n'
        "    self._try_error(err, 'Failed to verify\\n')\nnumba.cuda.cudadrv.error.NvvmError: Failed to verify\n"
    )
    plain, _ = _said(tmp_path, nvvm)
    assert "during jit-compile: libNVVM" in plain and "numba -s" in plain


def test_the_layer_that_printed_it_is_not_taken_for_the_one_at_fault(tmp_path: Path) -> None:
    # a package's own extension asks for an older CUDA's runtime: the package, not torch beside it
    text = ("----> 1 import ctc_ext\n\n~/env/lib/python3.8/site-packages/ctc_ext-0.2-py3.8-linux-x86_64.egg/ctc_ext/"
            "__init__.py in <module>\n      3 from torch.autograd import Function\n----> 5 from ._ctc import *\n\n"
            "ImportError: libcudart.so.10.1: cannot open shared object file: No such file or directory\n")  # fmt: skip
    plain, findings = _said(tmp_path, text)
    assert "The package ctc_ext cannot load libcudart.so.10.1" in plain
    assert "reinstall torch" not in plain and "shared-library-not-found-torch" not in _ids(findings)
    # Triton's own binary refused as it was loaded: not torch's arch list
    text = (
        '  File "/usr/lib/python3.12/site-packages/triton/compiler/compiler.py", line 412, in _init_handles\n'
        "    self.module, self.function, self.n_regs, self.n_spills = driver.active.utils.load_binary(\n"
        "RuntimeError: Triton Error [CUDA]: no kernel image is available for execution on the device\n"
    )
    plain, _ = _said(tmp_path, text)
    assert "Triton's own binary" in plain and "torch's arch list and TORCH_CUDA_ARCH_LIST do not apply" in plain
    # an out-of-memory after the memory in use grew at every step is a leak, not a batch too large
    text = "".join(f"step {n * 100} loss 2.{9 - n} allocated: {1.2 * n:.2f} GiB\n" for n in range(1, 5)) + (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity of "
        "7.79 GiB of which 41.00 MiB is free.\n"
    )
    plain, findings = _said(tmp_path, text)
    assert _ids(findings)[0] == "gpu-memory-grows-until-out-of-memory"
    assert "grew from 1.20 GiB to 4.80 GiB over 4 readings" in plain
    # the same figures flat: not a leak (the ordinary answer)
    flat = (
        text.replace("allocated: 2.40", "allocated: 1.20")
        .replace("allocated: 3.60", "allocated: 1.20")
        .replace("allocated: 4.80", "allocated: 1.21")
    )
    _, findings = _said(tmp_path, flat)
    assert "gpu-memory-grows-until-out-of-memory" not in _ids(findings)


def test_a_frame_or_a_diagnostic_is_not_taken_for_the_cause(tmp_path: Path) -> None:
    # an idle thread's frame in Python's own library is never "your program"
    text = ('Thread 0x7f (most recent call first):\n  File "/usr/lib/python3.11/threading.py", line 331 in wait\n'
            'Current thread 0x7e (most recent call first):\n  File "/env/lib/python3.11/site-packages/cupy/_core/'
            'core.py", line 88 in get\nFatal Python error: Segmentation fault\n')  # fmt: skip
    plain, _ = _said(tmp_path, text)
    assert "threading.py" not in plain and "your program" not in plain
    # a diagnostic's own error beside a list of packages of two CUDA majors: the mix is the answer
    text = ("$ numba -s\n__CUDA Information__\nError: cannot query the runtime version: CudaSupportError\n"
            "__Installed Packages__\ncuda-bindings 13.0.3\nnvidia-cuda-runtime-cu12 12.8.90\n"
            "nvidia-nvjitlink-cu12 12.8.93\nnumba-cuda 0.19.1\n")  # fmt: skip
    plain, findings = _said(tmp_path, text)
    assert _ids(findings)[0] == "packages-of-two-cuda-majors-in-text"
    assert "CUDA 12: nvidia-cuda-runtime-cu12, nvidia-nvjitlink-cu12; CUDA 13: cuda-bindings 13.x" in plain


def test_numbers_without_their_words_are_named(tmp_path: Path) -> None:
    # a kernel log's Xid codes: each said, the hardware's looked at first
    text = ("[10.1] NVRM: Xid (PCI:0000:00:05): 43, pid=104, name=pt_main_thread, Ch 00000008\n"
            "[11.2] NVRM: Xid (PCI:0000:00:07): 31, pid=251, name=python3.10, Ch 00000008, intr 00000000. MMU Fault\n"
            "[12.3] NVRM: Xid (PCI:0000:00:08): 95, pid='<unknown>', name=<unknown>, Uncontained: FBHUB\n")  # fmt: skip
    plain, _ = _said(tmp_path, text)
    assert "Xid 43 (process pt_main_thread): GPU stopped processing" in plain
    assert "Xid 31 (process python3.10): GPU memory page fault" in plain
    assert "next: Xid 95 first (the GPU's hardware or platform): reset the GPU" in plain
    # a bare CUDA status: named in the numbering of the reporter's CUDA, both where the log gives none
    plain, _ = _said(tmp_path, "RuntimeError: cuda runtime error (100)\n")
    assert "CUDA status 100 is cudaErrorNoDevice" in plain and "during load" in plain
    plain, _ = _said(tmp_path, "CUDA used to build PyTorch: 9.0\nRuntimeError: cuda runtime error (38)\n")
    assert "CUDA status 38 is cudaErrorNoDevice" in plain and "CUDA 10.0 and before" in plain
    plain, _ = _said(tmp_path, "RuntimeError: cuda runtime error (4)\n")
    assert "cudaErrorCudartUnloading" in plain and "cudaErrorLaunchFailure in CUDA 10.0 and before" in plain
    # the display watchdog's words
    plain, _ = _said(tmp_path, "RuntimeError: CUDA error: the launch timed out and was terminated\n")
    assert "display watchdog" in plain and "display_active" in plain


def test_more_failures_in_their_own_words_are_never_no_failure(tmp_path: Path) -> None:
    _each_read_as_failure(
        tmp_path,
        (
            ("ValueError: mod.Foo has the wrong size, try recompiling. Expected 48, got 40\n", "during import"),
            ("[0.9] NVRM: No NVIDIA graphics adapter found!\n[0.9] NVRM: NVIDIA init module failed!\n", "lspci -nnk"),
            ("'sm_130' is not a recognized processor for this target (ignoring processor)\n", "does not know sm_130"),
            ('Mojo fails with "not a recognized processor"\n', "a newer release"),
            (
                "[/usr/local/lib/python3.10/dist-packages/torch/_inductor/compile_fx.py](https://localhost:8080/#) in "
                "compile_fx(model_, example_inputs_)\n-> 1150         return aot_autograd(\n",
                "during jit-compile",
            ),
        ),
    )


def test_the_drivers_own_failures_are_the_drivers(tmp_path: Path) -> None:
    # nvidia-smi's words when the kernel module is not there: never "no failure"
    smi = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
        "NVIDIA driver is installed and running.\n"
    )
    plain, _ = _said(tmp_path, smi)
    assert "no failure found" not in plain and "lsmod | grep nvidia" in plain and "during load" in plain
    # a library of the driver's (not CUDA's toolkit's, not a pip wheel's) missing in a container
    plain, findings = _said(
        tmp_path,
        "nvidia-container-cli: initialization error: load library failed: "
        "libnvidia-ml.so.1: cannot open shared object file: no such file or directory\n",
    )
    assert "driver-library-not-found" in str(_ids(findings)) and "pip's nvidia-* wheels" in plain
    assert "shared-library-not-found" not in str(_ids(findings))
    # a module load the driver's compiler refused: a load, not a native crash while running
    plain, _ = _said(tmp_path, "cuModuleLoadData failed: CUDA_ERROR_INVALID_PTX\nAborted (core dumped)\n")
    assert "during load" in plain and "PTX made by a CUDA toolkit newer than the driver" in plain


def test_what_public_reports_found_is_evidence_beside_the_texts_own_reading(tmp_path: Path) -> None:
    # one public report of the same error is a candidate to check, not the verdict: the generic reading leads
    plain, report = _explain(tmp_path, "CudaDriverError: driver missing function: cuInit.\n")
    findings = report["findings"]  # type: ignore[index]
    lead = [f for f in findings if not f.get("part_of")]  # type: ignore[union-attr]
    assert [f["id"] for f in lead] == ["not-a-known-failure"]
    candidates = [f for f in findings if f["id"] == "public-reports-of-the-same-error"]  # type: ignore[index]
    assert candidates and candidates[0]["part_of"] == "not-a-known-failure"
    assert "a candidate to check against your versions and setup, not yet an answer" in plain
    plain, _ = _explain(tmp_path, "nvidia-container-cli: initialization error: cuda error: unknown error\n")
    assert "nvidia-smi on the host" in plain


def test_the_container_and_loader_words_are_read(tmp_path: Path) -> None:
    _each_read_as_failure(
        tmp_path,
        (
            # docker with no NVIDIA runtime registered, in both of docker's wordings
            (
                'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].\n',
                "nvidia-ctk runtime configure",
            ),
            (
                "docker: Error response from daemon: could not select device driver with capabilities: [[gpu]].\n",
                "nvidia-ctk runtime configure",
            ),
            # a container that lost its device nodes
            (
                "collector - ERROR - nvidia-smi exited 255, stdout: Failed to initialize NVML: Unknown Error\n",
                "systemctl daemon-reload",
            ),
            # a build's link against the unversioned driver library
            ("ld: library not found for -lcuda\ncollect2: ld returned 1 exit status\n", "unversioned -lcuda"),
            # a library list whose entries were not found: a load
            ("nvrtc64_112_0.dll -> not found\ncudart64_110.dll -> not found\n", "during load"),
            # cudaErrorInvalidDeviceFunction in a library's own words: no code for this GPU
            (
                "Failed: Cuda error ./lib/kern.cu:120 'invalid device function'\n",
                "no binary for this GPU's architecture",
            ),
            # the driver refusing PTX, in a package's wording
            ("RuntimeError: CUDA: Error- invalid ptx\n", "PTX made by a CUDA toolkit newer than the driver"),
            # numba's typing of a host API inside a kernel
            ("Unknown attribute 'device_array' of type Module(<module 'numba.cuda'>)\n", "numba-cuda could not type"),
        ),
    )


def test_a_crash_inside_the_driver_and_a_sources_own_guard(tmp_path: Path) -> None:
    # a debugger's backtrace through libcuda: a crash inside the driver, handed something invalid
    plain, _ = _said(tmp_path, "#0  0x00007f10c8e3fe in ?? () from /usr/lib64/libcuda.so.1\n"
                               "#1  0x00007f10cdd27c in ?? () from /usr/lib64/libcuda.so.1\n")  # fmt: skip
    assert "no failure found" not in plain and "crashed inside the CUDA driver" in plain
    # a header's #error guard and a package's own version-mismatch warning: quoted as the tool's own words
    plain, _ = _said(tmp_path, "kern/defs.cuh:18:2: error: #error Unsupported __CUDA_ARCH__ for this table\n")
    assert 'it says itself: "error Unsupported __CUDA_ARCH__ for this table"' in plain
    plain, _ = _said(tmp_path, "UserWarning: WARNING: Version mismatch between mypkg._core ('2.1.0') and "
                               "mypkg._cuda ('2.0.3')\nRuntimeError: CUDA core failed to start\n")  # fmt: skip
    assert "it says itself: \"UserWarning: WARNING: Version mismatch between mypkg._core ('2.1.0')" in plain


def test_a_failure_said_in_prose_or_a_title_is_never_no_failure(tmp_path: Path) -> None:
    _each_read_as_failure(
        tmp_path,
        (
            ("numba cannot find libnvvm on this machine\n", "cannot find NVVM"),
            ("OSError: library nvvm not found\n", "cannot find NVVM"),
            ('Get "module cupy has no attribute elementwise" after installing\n', "during import"),
            ("CUDA OOM when the batch size is set automatically\n", "an allocation on the GPU failed"),
            ("Sampler No available kernel. Aborting execution.\n", "Not a known failure"),
            (
                "nvidia-container-cli: initialization error: driver rpc error: timed out: unknown.\n",
                "nvidia-persistenced",
            ),
            ("    /usr/bin/ld: cannot find -lncurses: No such file or directory\n", "libncurses-dev"),
            ("SystemError: CUDA_ERROR_INVALID_SOURCE\n", "during load"),
            (
                "UNREACHABLE executed at /src/third_party/proj/lib/Analysis/PtrAnalysis.cpp:377!\n"
                "triton-shared-opt: Casting.h:566: Assertion `isa<To>(Val)' failed.\n",
                "internal checks while compiling",
            ),
            ("ValueError: Did you forget to add @triton.jit ? (`_builder` argument must be provided)\n", "jit-compile"),
        ),
    )
    # a log with no failure in it is still said to have none
    plain, _ = _said(tmp_path, "epoch 1 loss 0.31\nepoch 2 loss 0.22\nsaved checkpoint to out/model.pt\n")
    assert "no failure found" in plain


def test_what_the_text_shows_of_the_environment_decides_before_a_release(tmp_path: Path) -> None:
    # Python's "'cuda' is not a package": the user's own cuda.py took the package's name
    plain, _ = _said(tmp_path, 'Traceback (most recent call last):\n  File "/srv/app/cupy.py", line 1, in <module>\n'
                               "    import cupy.cuda\nModuleNotFoundError: No module named 'cupy.cuda'; 'cupy' is "
                               "not a package\n")  # fmt: skip
    assert "a module named cupy that is not a package" in plain and "rename your cupy.py" in plain
    assert "release of cupy" not in plain
    # Mojo's empty target architecture: no GPU it supports was found, not a release that lacks the architecture
    _, findings = _said(tmp_path, "/stdlib/builtin/constrained.mojo:58:6: note: constraint failed: the target "
                                  "architecture '' is not valid\n")  # fmt: skip
    assert _ids(findings) == ["mojo-gpu-code-without-a-gpu"]
    # a compiler's crash: first whether it crashes on any program (its installation) before its releases
    plain, _ = _said(tmp_path, "Stack dump:\n0.      Program arguments: mojo run hello.mojo\nmojo crashed!\n")
    assert "first the same compiler on a trivial program" in plain


def test_another_vendors_stack_and_a_later_calls_status_are_not_cuda_init(tmp_path: Path) -> None:
    # ROCm's Triton: no CUDA driver or ptxas to blame for an invalid image
    _, findings = _said(
        tmp_path, "RuntimeError: Triton Error [HIP]: Code: 200, Messsage: device kernel image is invalid\n"
    )
    assert not [i for i in _ids(findings) if str(i).startswith("gpu-binary-rejected-by-driver")]
    # CUDA_ERROR_UNKNOWN from the driver's linker: CUDA had started, this is the kernel's link
    plain, findings = _said(tmp_path, "numba.cuda.cudadrv.driver.CudaAPIError: [999] Call to cuLinkComplete results "
                                      "in CUDA_ERROR_UNKNOWN\n")  # fmt: skip
    assert not [i for i in _ids(findings) if str(i).startswith("cuda-init-unknown-error")]
    assert "during jit-compile" in plain and "nvidia_uvm" not in plain
    # a dtype two libraries exchanging through DLPack do not share
    plain, _ = _said(tmp_path, "Unsupported DLPack dtype ('float8_e4m3fn', 8)\n")
    assert "DLPack interop" in plain and "has no type for the producer's dtype" in plain
    _each_read_as_failure(
        tmp_path,
        tuple(
            (text, "")
            for text in (
                "`from_dlpack` causes segmentation fault on unsupported dtype\n",
                "DLL load failed while importing cuda_utils\n",
                " assert acc.type.shape == ret_ty.shape\n",
                "- the client **raises** on GPU arrays\n",
            )
        ),
    )


def test_where_the_text_shows_no_phase_public_reports_that_found_one_cause_lead(tmp_path: Path) -> None:
    # the generic reading would say nothing the text shows; threads of the same error that found one cause are the
    # better answer
    text = ("stream = cuda.Stream()\npycuda._driver.LogicError: explicit_context_dependent failed: invalid device "
            "context - no currently active context?\n")  # fmt: skip
    _, findings = _said(tmp_path, text)
    lead = [f for f in findings if not f.get("part_of")]  # type: ignore[union-attr]
    assert [f["id"] for f in lead] == ["same-error-in-public-reports"]
    assert "not-a-known-failure" not in _ids(findings)
    # threads that found different causes are candidates beneath the text's own reading, never its answer alone (a
    # Mojo parse error answered by one public report of another cause misled)
    plain, findings = _said(
        tmp_path, "[1:1:20240605,083724.595583:ERROR elf_dynamic_array_reader.h:64] tag not found\n"
    )
    lead = [f for f in findings if not f.get("part_of")]  # type: ignore[union-attr]
    assert [f["id"] for f in lead] == ["not-a-known-failure"] and "each a different one" in plain
    # a pasted text that says no failure's word is still "no failure found"
    plain, _ = _said(tmp_path, "step 10 loss 0.52 lr 3e-4\nstep 20 loss 0.47 lr 3e-4\nwrote checkpoint-20\n")
    assert "no failure found in this log" in plain


def test_a_requirement_stated_and_a_glog_error_line_are_failures(tmp_path: Path) -> None:
    _each_read_as_failure(
        tmp_path,
        tuple(
            (text, "")
            for text in (
                "PY_SSIZE_T_CLEAN macro must be defined for '#' formats\n",
                "    Microsoft Visual C++ 14.0 is required. Get it with the Build Tools\n",
                "E1209 21:52:30.538000 13612 site-packages/torch/_inductor/runtime/triton_heuristics.py:539] [0/0]\n",
                "server: no supported GPUs detected\n",
                "/dev/nvidia0 does not exist\n",
            )
        ),
    )


def test_the_name_of_the_pasted_file_is_no_evidence(tmp_path: Path) -> None:
    log = tmp_path / "pycuda_triton_crash.log"
    log.write_text("OverflowError: Python int too large to convert to C long\n")
    plain = run_cli("explain", str(log), timeout=120).stdout
    assert "cuda-python" not in plain and "PyCUDA" not in plain and "Triton" not in plain


def test_the_codes_tables_name_only_what_the_vocabulary_and_the_reading_know(tmp_path: Path) -> None:
    from gpudoctor.errors import GpuDoctorError
    from gpudoctor.knowledge.codes import BY_ORDER, CODES, load_codes
    from gpudoctor.knowledge.vocabulary import load_vocabulary

    codes, kinds = load_codes(), load_vocabulary().kinds
    assert {s.kind for s in codes.statuses.values() if s.kind} <= set(kinds)  # answer() looks each one up
    assert {x.by for x in codes.xids.values()} <= set(BY_ORDER)
    bad = tmp_path / "codes.toml"
    bad.write_text(CODES.read_text().replace('by = "hardware"', 'by = "cosmic rays"', 1))
    try:
        load_codes(bad)
    except GpuDoctorError as refused:
        assert "'by' must be one of" in str(refused)
    else:
        raise AssertionError("a codes table with an unknown 'by' was loaded")


def test_a_limit_a_platform_a_frontend_and_a_cleanup_are_read_in_their_own_words(tmp_path: Path) -> None:
    """heldout9's generic answers whose next step did not reach the cause, by class: the limit the message names, a
    feature the platform lacks, Triton's frontend refusing a construct, a destructor's error after a failed
    constructor, Windows' missing DLL, a build without nvcc, torch without CUDA, a container without its GPUs."""
    cases = (
        ("error: Maximum allowed number of elements is 1048576, but %3 = tt.make_range {end = 4194304 : i32} : "
         "tensor<4194304xi32> has more than that\n", "Triton failed during jit-compile"),
        ("OverflowError: Python int too large to convert to C unsigned long\n", "a limit it (or the hardware) has"),
        ("pycuda._driver.LogicError: cuMemHostRegister failed: operation not supported\n",
         "does not provide the operation"),
        ("AssertionError('Loop-carried variable acc has initial type <[64], fp32> but is re-assigned to <[64], fp16> "
         "in loop! Please make sure that the type stays consistent.')\n", "TRITON_INTERPRET=1"),
        ("Exception ignored in: <function Session.__del__ at 0x7f00aa>\nTraceback (most recent call last):\n"
         '  File "/env/lib/python3.11/site-packages/gpukit/session.py", line 88, in __del__\n    self._ctx.pop()\n'
         "AttributeError: 'Session' object has no attribute '_ctx'\n", "constructor had failed before it set _ctx"),
        ('  File "cupy\\cuda\\memory.pyx", line 3, in init cupy.cuda.memory\n'
         "ImportError: DLL load failed while importing driver: The specified module could not be found.\n",
         "CuPy failed during import"),
        ("building the colour kernels\nerror: could not find nvcc, set CUDA_HOME\n", "which nvcc"),
        ('  File "/env/lib/python3.11/site-packages/torch/cuda/streams.py", line 34, in __new__\n'
         "RuntimeError: Tried to instantiate dummy base class Event\n", "torch.version.cuda is None"),
        ("==========\n== CUDA ==\n==========\nWARNING: The NVIDIA Driver was not detected.  GPU functionality will "
         "not be available.\n", "started without the GPUs"),
        ('Error response from daemon : could not select device driver "nvidia" with capabilities : [[gpu]]\n',
         "docker has no device driver"),
        ("Please submit a bug report to https://github.com/modular/modular/issues and include the crash backtrace.\n"
         "Stack dump:\n0.      Program arguments: mojo run serve.mojo\nSegmentation fault\n",
         "mojo build serve.mojo -o prog"),
    )  # fmt: skip
    _each_read_as_failure(tmp_path, cases)
    # a Cython frame of an installed package is the package's, never "your program"
    plain, _ = _said(tmp_path, cases[5][0])
    assert "your program" not in plain
    # the compiler's own frames in Mojo's report: its compile, not the ambiguous `mojo run`
    plain, _ = _said(tmp_path, "#3 M::KGEN::KGENCompiler::runKGENPipeline\nmojo crashed!\nStack dump:\n"
                               "0.      Program arguments: mojo run serve.mojo\n")  # fmt: skip
    assert "internal checks while compiling" in plain and "mojo build serve.mojo" not in plain


def test_another_vendors_stack_gets_its_own_instruments_beside_nvidias(tmp_path: Path) -> None:
    rocm = ("RuntimeError: HIP error: hipErrorNoBinaryForGpu: Unable to find code object for all current devices!\n"
            "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.\n")  # fmt: skip
    plain, _ = _said(tmp_path, rocm)
    assert "on AMD's ROCm (HIP), NVIDIA's instruments do not apply" in plain and "rocminfo" in plain
    plain, _ = _said(tmp_path, "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    assert "NVIDIA's instruments do not apply" not in plain


def test_a_link_a_removed_api_an_op_without_cuda_and_nvml_are_read_in_their_own_words(tmp_path: Path) -> None:
    """heldout10's generic misses by class, in made-up texts of the same shapes: the linker's own statement (a library
    missing from the link line, an older libstdc++), PyTorch's removed C++ API, an operator or an extension without its
    CUDA code, a device index that does not exist, NVML that did not start, docker without NVIDIA's runtime, a
    container asking for a GPU the host lacks, numba-cuda's simulator, Triton on Windows without CUDA."""
    cases = (
        ("/usr/bin/ld: /tmp/mojo_archive-1a2b3c.a: undefined reference to symbol 'expf@@GLIBC_2.27'\n"
         "/usr/bin/ld: /lib/x86_64-linux-gnu/libm.so.6: error adding symbols: DSO missing from command line\n"
         "collect2: error: ld returned 1 exit status\nmojo: error: failed to link executable\n",
         "mojo build -Xlinker -lm"),
        ("/usr/bin/ld: /env/lib/libfoo.so: undefined reference to `std::__throw_bad_array_new_length()"
         "@GLIBCXX_3.4.29'\n"
         "collect2: error: ld returned 1 exit status\n", "GLIBCXX_3.4.29"),
        ("/src/ext/src/roi_align.cpp:8:3: error: 'AT_CHECK' was not declared in this scope\n", "TORCH_CHECK"),
        ("NotImplementedError: Could not run 'myops::fused_gelu' with arguments from the 'CUDA' backend.\n",
         "the operator myops::fused_gelu has no kernel for CUDA"),
        ("ImportError: /env/lib/python3.11/site-packages/detx/_ext.so: undefined symbol: "
         "_Z13roi_pool_cudaRKN2at6TensorE\n",
         "its CUDA sources were not compiled in"),
        ("terminate called after throwing an instance of 'std::runtime_error'\n  what():  cudaSetDevice(2) invalid "
         "device ordinal\nAborted (core dumped)\n", "nvidia-smi -L and echo $CUDA_VISIBLE_DEVICES"),
        ("pynvml.nvml.NVMLError_Uninitialized: Uninitialized\n", "NVML (the driver's management library"),
        ("docker: Error response from daemon: Unknown runtime specified nvidia.\n", "nvidia-ctk runtime configure"),
        ("stderr: nvidia-container-cli: device error: GPU-0000aaaa: unknown device: unknown\n",
         "nvidia-smi -L on the host"),
        ('  File "/env/lib/python3.10/site-packages/numba/cuda/simulator/api.py", line 40, in stream\n'
         "TypeError: __init__() got an unexpected keyword argument 'priority'\n", "NUMBA_ENABLE_CUDASIM"),
        ("cuda_utils.c\nLINK : fatal error LNK1181: cannot open input file 'cuda.lib'\n", "CUDA_PATH"),
    )  # fmt: skip
    _each_read_as_failure(tmp_path, cases)
    # the simulator's missing name is the stand-in's, not a release's
    _missing_name_is_no_release(tmp_path, "AttributeError: module 'numba.cuda.simulator.cudadrv.driver' has no "
                                          "attribute 'device_memset'\n", "CUDA simulator")  # fmt: skip
    # code exec'd from a string (a generated launcher) is never "your program"
    plain, _ = _said(tmp_path, '  File "/env/lib/python3.10/site-packages/triton/runtime/jit.py", line 291, in '
                               '_make_launcher\n    exec(src, scope)\n  File "<string>", line 3\n'
                               "SyntaxError: invalid syntax\n")  # fmt: skip
    assert "your program" not in plain and "Triton failed during jit-compile" in plain


def test_a_builds_missing_python_headers_are_no_triton_launcher_and_a_missing_device_node_is_read(
    tmp_path: Path,
) -> None:
    build = ("running build_ext\nbuilding 'fastops._ext' extension\ngcc -pthread -fPIC -I/usr/include/python3.10 -c "
             "ext.c -o build/ext.o\next.c:3:10: fatal error: Python.h: No such file or directory\n")  # fmt: skip
    plain, findings = _said(tmp_path, build)
    ids = " ".join(map(str, _ids(findings)))
    assert "python-headers-missing" in ids and "triton-launcher-cannot-build" not in ids
    assert "python3.X-dev" in plain
    triton = ('  File "/env/lib/python3.11/site-packages/triton/runtime/build.py", line 32, in _build\n'
              "/tmp/tmpx1/cuda_utils.c:6:10: fatal error: Python.h: No such file or directory\n")  # fmt: skip
    _, findings = _said(tmp_path, triton)
    ids = " ".join(map(str, _ids(findings)))
    assert "triton-launcher-cannot-build" in ids and "python-headers-missing" not in ids
    _each_read_as_failure(tmp_path, (("no NVIDIA GPU device is present: /dev/nvidia1 does not exist\n", "lsmod"),))


def test_torch_without_cuda_nvml_answers_wheels_and_a_missing_extension_are_read(tmp_path: Path) -> None:
    """heldout11's misses by class, in made-up texts of the same shapes: torch's own 'not compiled with CUDA' (a title
    is a failure), an NVML query a board does not support, no nvidia-smi, a CUDA library of another major, Inductor
    without Triton, a wheel for another interpreter, a package server's 5xx, a solver's virtual package, SIGILL,
    Windows' WinError 126, and a tool's own instruction for its details."""
    cases = (
        ("Torch not compiled with CUDA enabled\n", "torch.version.cuda is None"),
        ("pynvml.NVMLError_NotSupported: Not Supported\n", "does not support the query"),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'nvidia-smi'\n", "nouveau"),
        ("OSError: libcublasLt.so.12 not found\n", "a CUDA 12 library"),
        ("Cannot find a working triton installation. Either the package is not installed or it is too old.\n",
         "the interpreter that runs it"),
        ("ERROR: somepkg-1.0-cp39-cp39-manylinux_2_17_x86_64.whl is not a supported wheel on this platform.\n",
         "pip debug --verbose"),
        ("error: http error: response code 503 - fetching the package index\n", "a fault on the server's side"),
        ("Error:   \u00d7 Cannot install environment 'default'\n"
         "  ╰─▶ Virtual package '__cuda >=12' does not match any of\n",
         "CONDA_OVERRIDE"),
        ("Illegal instruction (core dumped)\n", "/proc/cpuinfo"),
        ('OSError: [WinError 126] The specified module could not be found. Error loading "C:\\env\\torch\\lib\\'
         'cudnn64_9.dll" or one of its dependencies.\n', "during import"),
        ("Error on calling the monitor. Use --debug flag for details\n", 'it says itself: "Use --debug flag'),
        ("[BUG] myext/extension.h: undefined symbol\n", ""),
    )  # fmt: skip
    _each_read_as_failure(tmp_path, cases)
    # the text's own "extension not installed": the missing name is that extension, never a release to install
    _missing_name_is_no_release(tmp_path, "AttributeError: module 'fastq' has no attribute 'fastq_cuda'. Also: 'CUDA "
                                          "extension not installed.'\n", "compiled extension")  # fmt: skip


def test_a_compilers_generated_code_is_never_your_program(tmp_path: Path) -> None:
    # Inductor's output code runs from its cache folder: the user's own frame is the line that called the model
    text = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/proj/train.py", line 88, in <module>\n'
        "    out = model(x)\n"
        '  File "/tmp/torchinductor_u/qz/cqzabc123.py", line 412, in call\n'
        "    triton_poi_fused_add_0.run(buf0, 1024, grid=grid(1024), stream=stream0)\n"
        "ValueError: the generated call got an unexpected buffer layout\n"
    )
    plain, _ = _said(tmp_path, text)
    assert "your program (train.py:88)" in plain and "cqzabc123.py" not in plain.split("FAIL")[0]


def test_heldout13s_classes_read_from_the_texts_own_words(tmp_path: Path) -> None:
    # made-up texts of the shapes heldout13's generic answers missed (no text of a held-out set or a reserved thread)
    _each_read_as_failure(
        tmp_path,
        (
            ("NCCL WARN NET/IB : Got completion from peer 10.0.0.2<4242> with status=12 opcode=0 vendor err 129\n",
             "ibdev2netdev"),
            ("RuntimeError: NCCL Error 2: unhandled system error (run with NCCL_DEBUG=INFO for details)\n",
             'itself says: "run with NCCL_DEBUG=INFO for details"'),
            ("error: failed to reach URL https://example.org/pkg.json with cURL error Could not resolve host\n",
             "curl -I"),
            ("RuntimeError: CUDNN_STATUS_INTERNAL_ERROR\n", "CUDA_VISIBLE_DEVICES"),
            # a failure said by a signal handler, in a reporter's language, or by "no valid": never "no failure"
            ("[node3:12345] *** Process received signal ***\n", ""),
            ("kernel autotune 报错 no configs left\n", ""),
            ("autotuner: No valid configs for this kernel\n", ""),
        ),
    )  # fmt: skip
    plain, _ = _said(
        tmp_path, "error: failed to reach URL https://example.org/pkg.json with cURL error Could not resolve host\n"
    )
    assert "during install" in plain
    # a module no distribution here provides and none the knowledge maps: a package to install, or the project's own
    plain, _ = _said(tmp_path, "ImportError: No module named 'my_helpers'\n")
    assert "no implicit relative imports" in plain and "Install the release of my_helpers" not in plain


def test_a_core_name_missing_from_a_package_not_here_may_be_a_shadow_or_a_half_removed_install(tmp_path: Path) -> None:
    # every release of a package has its core names: where the interpreter examined has none to read, the answer
    # asks first whether what was imported is the package at all (a file named like it, a folder left by an uninstall)
    plain, _ = _said(tmp_path, "AttributeError: module 'widgetlib' has no attribute 'ndarray'\n")
    assert "python -c 'import widgetlib; print(widgetlib.__file__)'" in plain
    assert "is not the package" in plain and "a file or folder named widgetlib" in plain
