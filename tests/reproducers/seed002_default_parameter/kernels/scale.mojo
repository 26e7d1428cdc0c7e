# The kernel as seed 002's reporter wrote it (the MAX 25.4 generation): a compile-time parameter with a default.
import compiler
from runtime.asyncrt import DeviceContextPtr
from tensor import InputTensor, OutputTensor, foreach
from utils.index import IndexList


@compiler.register("scale")
struct Scale:
    @staticmethod
    fn execute[
        target: StaticString,
        factor: Int = 2,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2],
        input: InputTensor[dtype = DType.float32, rank=2],
        ctx: DeviceContextPtr,
    ) raises:
        @parameter
        @always_inline
        fn scale[width: Int](idx: IndexList[input.rank]) -> SIMD[DType.float32, width]:
            return input.load[width](idx) * Float32(factor)

        foreach[scale, target=target](output, ctx)
