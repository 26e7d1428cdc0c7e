# racy_copy: meant to copy its input. Its threads also count into one shared element (output[0, 0]) with a plain
# read-modify-write, no atomic: updates are lost when two threads overlap, so that element differs from call to
# call. A data race in a kernel that otherwise writes every element — on the CPU between the workers of
# sync_parallelize, on a GPU between the threads of the foreach.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from max.algorithm import sync_parallelize
from layout import Coord


@register("racy_copy")
struct RacyCopy:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        var shared = output.unsafe_ptr()

        def copy[width: Int](idx: Coord) {input, shared} -> SIMD[DType.float32, width]:
            comptime if target != "cpu":
                var seen = shared.load[volatile=True]()
                shared.store[volatile=True](seen + 1)
            return input.load[width](idx)

        foreach[target=target](copy, output, ctx)
        comptime if target == "cpu":

            def count(worker: Int) {shared}:
                for _ in range(1000000):  # long enough to overlap on a busy machine; 8e6 stays exact in float32
                    var seen = shared.load[volatile=True]()
                    shared.store[volatile=True](seen + 1)

            sync_parallelize(count, 8)
