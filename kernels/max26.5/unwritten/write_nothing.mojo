# Layout-contract probe's op (max26.5 generation): writes nothing, so that what its output holds after a call
# shows whose buffer the op was handed: the caller's (its contents kept) or one MAX allocates and copies back.
from extensibility import register, InputTensor, OutputTensor
from max.gpu.host import DeviceContext


@register("write_nothing")
struct WriteNothing:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        pass  # deliberately: the output is never written
