# row_max: one block per row on the GPU, launched with enqueue_function; the kernel's signature spans lines and
# indexes the tensors, which is right there (it runs on the device). The CPU path loops on the host, under
# `else` of a GPU test, where tensor memory is host memory.
from compiler import register
from gpu import block_idx, thread_idx
from runtime.asyncrt import DeviceContextPtr
from tensor import InputTensor, OutputTensor


@register("row_max")
struct RowMax:
    @staticmethod
    fn execute[
        dtype: DType,
        //,
        target: StaticString,
    ](
        out_vals: OutputTensor[dtype=dtype, rank=2],
        in_vals: InputTensor[dtype=dtype, rank=2],
        ctx: DeviceContextPtr,
    ) raises:
        var rows = in_vals.dim_size(0)
        var cols = in_vals.dim_size(1)

        @parameter
        fn row_max_gpu[
            width: Int,
        ](
            out_vals: __type_of(out_vals),
            in_vals: __type_of(in_vals),
        ):
            var row = block_idx.x
            if thread_idx.x == 0:
                var best = in_vals[row, 0]
                for j in range(1, cols):
                    best = max(best, in_vals[row, j])
                out_vals[row, 0] = best

        @parameter
        if target == "gpu":
            var dev_ctx = ctx.get_device_context()
            dev_ctx.enqueue_function[row_max_gpu[1]](
                out_vals,
                in_vals,
                grid_dim=rows,
                block_dim=1,
            )
        else:
            for i in range(rows):
                var best = in_vals[i, 0]
                for j in range(1, cols):
                    best = max(best, in_vals[i, j])
                out_vals[i, 0] = best
