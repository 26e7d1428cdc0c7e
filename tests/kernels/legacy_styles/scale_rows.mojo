# scale_rows: element-wise with foreach; the element function's parameter list and signature span lines.
import compiler
from runtime.asyncrt import DeviceContextPtr
from tensor import InputTensor, OutputTensor, foreach
from utils.index import IndexList


@compiler.register("scale_rows")
struct ScaleRows:
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
        fn scaled[
            width: Int
        ](
            idx: IndexList[input.rank]
        ) -> SIMD[DType.float32, width]:
            return input.load[width](idx) * Float32(factor)

        foreach[scaled, target=target](output, ctx)
