"""compute-sanitizer's reports, as recorded on the H100 for the faulty programs of tests/faulty_programs, read by
the real parser: kernel, line, thread, access and distance for memory errors; call and error for launches refused;
the Python line of the launch; a report cut short keeps what it had."""

from __future__ import annotations

from conftest import TESTS

from gpudoctor.instruments.sanitizer import ErrorKind, parse

FAULTS = TESTS / "fixtures" / "h100" / "faults"


def _report(program: str, mode: str = "memcheck") -> str:
    return (FAULTS / program / f"{mode}.out").read_text()


def test_a_triton_store_with_the_wrong_stride_is_named_by_kernel_line_thread_and_distance() -> None:
    report = parse(_report("triton_wrong_stride"))
    first = report.errors[0]
    assert first.kind is ErrorKind.OUT_OF_BOUNDS
    assert (first.access, first.size_bytes, first.space) == ("write", 16, "global")
    assert (first.kernel, first.source) == ("scale_rows", "triton_wrong_stride.py:14")
    assert first.thread == (64, 0, 0) and first.block == (60, 0, 0)
    assert (first.distance_bytes, first.direction, first.allocation_bytes) == (1_442_817, "after", 65_536)
    site = first.launch_site(frozenset({"triton_wrong_stride.py"}))
    assert site is not None and (site.file, site.line) == ("triton_wrong_stride.py", 19)
    assert report.error_count is None  # the recording was cut at 40 kB, before the summary


def test_a_cupy_kernel_without_bounds_check_reads_past_its_array() -> None:
    first = parse(_report("cupy_no_bounds")).errors[0]
    assert (first.kind, first.access, first.kernel, first.source) == (ErrorKind.OUT_OF_BOUNDS, "read", "saxpy", None)
    # the nearest allocation is whatever lies closest, not necessarily the array the kernel meant to read
    assert (first.distance_bytes, first.direction, first.allocation_bytes) == (61_184, "after", 1)
    assert first.block == (4159, 0, 0)  # past the 3907 blocks that cover n
    site = first.launch_site()
    assert site is not None and (site.file, site.line) == ("cupy_no_bounds.py", 16)


def test_numba_writes_one_past_its_output_and_the_kernel_name_loses_its_abi_tag() -> None:
    report = parse(_report("numba_oob_write"))
    write, sync = report.errors
    assert write.kernel == "__main__::shift_right" and write.access == "write"
    assert write.thread == (255, 0, 0) and write.block == (3, 0, 0)
    assert (write.distance_bytes, write.direction, write.allocation_bytes) == (1, "after", 4096)
    site = write.launch_site()
    assert site is not None and (site.file, site.line) == ("numba_oob_write.py", 15)
    assert (sync.kind, sync.api_call, sync.api_error) == (
        ErrorKind.API_ERROR, "cuCtxSynchronize", "CUDA_ERROR_LAUNCH_FAILED")  # fmt: skip
    assert report.error_count == 2 and report.target_failed


def test_launches_the_gpu_refuses_are_the_call_and_its_error() -> None:
    threads = parse(_report("ext_too_many_threads")).errors[0]
    assert (threads.kind, threads.api_call, threads.api_error, threads.api_error_text) == (
        ErrorKind.API_ERROR, "cudaLaunchKernel", "cudaErrorInvalidValue", "invalid argument")  # fmt: skip
    assert threads.host_frames[0].function.startswith("add_one_kernel(")
    shared = parse(_report("cupy_too_much_shared")).errors[0]
    assert (shared.api_call, shared.api_error) == ("cuLaunchKernel", "CUDA_ERROR_INVALID_VALUE")


def test_a_device_assert_and_out_of_memory() -> None:
    asserted = parse(_report("torch_index_assert")).errors[0]
    assert asserted.kind is ErrorKind.DEVICE_ASSERT and asserted.kernel is None and asserted.block == (1000, 0, 0)
    oom = parse(_report("torch_oom")).errors[0]
    assert (oom.kind, oom.api_call, oom.api_error) == (ErrorKind.API_ERROR, "cudaMalloc", "cudaErrorMemoryAllocation")


def test_the_caching_allocator_hides_a_read_past_the_input_and_turning_it_off_shows_it() -> None:
    cached = parse(_report("triton_silent_oob_read", "memcheck-cached"))
    assert cached.clean and cached.error_count == 0
    uncached = parse(_report("triton_silent_oob_read"))
    first = uncached.errors[0]
    assert (first.kind, first.access, first.kernel, first.source) == (
        ErrorKind.OUT_OF_BOUNDS, "read", "add_bias", "triton_silent_oob_read.py:12")  # fmt: skip
    assert (first.distance_bytes, first.allocation_bytes) == (1, 4000)  # just past the 1000 floats of x
    assert uncached.error_count == 14 and not uncached.clean


def test_text_around_the_report_and_a_report_cut_mid_error_are_read_without_fuss() -> None:
    text = "program output\n" + _report("numba_oob_write") + "more output\n"
    assert len(parse(text).errors) == 2
    cut = _report("numba_oob_write")[:400]
    partial = parse(cut)
    assert partial.error_count is None and partial.errors[0].kernel == "__main__::shift_right"
    assert parse("").errors == () and parse("\x00\xff garbage ========= \n=========").errors == ()


def test_each_recorded_fault_is_told_in_one_line_that_names_kernel_line_and_launch() -> None:
    from gpudoctor.instruments.explain import summarise

    stride = summarise(parse(_report("triton_wrong_stride")), {"triton_wrong_stride.py"})
    assert stride[0].startswith("kernel `scale_rows` (triton_wrong_stride.py:14) writes 16 bytes of global memory out")
    assert stride[0].endswith("launched at triton_wrong_stride.py:19 — 20 of the 20 errors printed")
    numba = summarise(parse(_report("numba_oob_write")))
    assert numba == [
        "kernel `__main__::shift_right` writes 4 bytes of global memory out of bounds (thread (255,0,0) of block"
        " (3,0,0), 1 bytes after the nearest allocation, which holds 4,096 bytes), launched at numba_oob_write.py:15"
    ]  # the launch failure that follows is its echo, not a second cause
    threads = summarise(parse(_report("ext_too_many_threads")))
    assert threads[0].startswith("the CUDA call cudaLaunchKernel failed with cudaErrorInvalidValue (invalid argument)"
                                 " in add_one_kernel")  # fmt: skip
    assert "launched at ext_too_many_threads.py:" in threads[0]


def test_a_kernel_max_made_of_a_foreach_is_said_to_be_one() -> None:
    """MAX names the kernel of a custom op's foreach itself (no line info): the sentence says what it is, so the user
    knows to look at their op's closure (the name as recorded by `gpudoctor run --sanitize` on the H100)."""
    import dataclasses

    from gpudoctor.instruments.explain import describe

    error = parse(_report("cupy_no_bounds")).errors[0]
    made = dataclasses.replace(error, kernel="mogg_for_each_r2_w4_b256_gs_False_825399b6", source=None)
    assert describe(made).startswith(
        "kernel `mogg_for_each_r2_w4_b256_gs_False_825399b6` (the kernel MAX made of a custom op's `foreach` closure)"
        " reads 4 bytes of global memory out of bounds"
    )
    assert describe(dataclasses.replace(error, source=None)).startswith("kernel `saxpy` reads")


def test_initcheck_on_a_copy_to_the_host_is_said_to_be_a_copy_not_a_kernel() -> None:
    """numba_oob_write under `run --sanitize` on the H100: its kernel never writes out[0], and initcheck flags the
    program's copy of `out` back to the host, a host API call, not a kernel (the H100 recording said "a kernel")."""
    import dataclasses

    from gpudoctor.instruments.explain import describe
    from gpudoctor.instruments.sanitizer import ErrorKind

    error = parse(_report("cupy_no_bounds")).errors[0]
    copy = dataclasses.replace(
        error, kind=ErrorKind.UNINITIALIZED, kernel=None, source=None,
        headline="Host API memory access error at host access to 0x7f9ba4801000 of size 4,096 bytes",
    )  # fmt: skip
    said = describe(copy)
    assert said.startswith("a copy from the GPU reads memory no kernel wrote (Host API memory access error")
    assert ", called at " in said or "launched" not in said
