# conv1d_stub: a conv1d whose body was never filled in (as in a public conv1d kernel whose CPU path was a stub):
# it writes nothing on any device. MAX 26.7's CPU path hands the op a buffer of its own, fresh (zeros) or reused
# (an earlier result), so what comes back depends on the buffer; on a GPU the caller's output shows through.
from extensibility import register, InputTensor, OutputTensor
from max.gpu.host import DeviceContext


@register("conv1d_stub")
struct Conv1dStub:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.float32, rank=2, ...],
        input: InputTensor[dtype = DType.float32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        pass  # TODO: the convolution
