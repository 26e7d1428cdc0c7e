# Correct ops whose right results include the values a naive "unwritten" marker would use (issue 43): uint8 zeros
# (a dark pixel), an integer's smallest value, False, NaN. None of them leaves an output unwritten.
from extensibility import register, InputTensor, OutputTensor, foreach
from max.gpu.host import DeviceContext
from layout import Coord


# A grayscale conversion written as MAX's image example writes it: uint8 in (rows, cols, 3), uint8 out (rows, cols);
# black pixels give 0.
@register("luma")
struct Luma:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        img_out: OutputTensor[dtype = DType.uint8, rank=2, ...],
        img_in: InputTensor[dtype = DType.uint8, rank=3, ...],
        ctx: DeviceContext,
    ) raises:
        def gray[width: Int](idx: Coord) {img_in} -> SIMD[DType.uint8, width]:
            var r = img_in.load[width](Coord(idx[0], idx[1], 0)).cast[DType.float32]()
            var g = img_in.load[width](Coord(idx[0], idx[1], 1)).cast[DType.float32]()
            var b = img_in.load[width](Coord(idx[0], idx[1], 2)).cast[DType.float32]()
            return min(0.21 * r + 0.71 * g + 0.07 * b, 255).cast[DType.uint8]()

        foreach[target=target, simd_width=1](gray, img_out, ctx)


# An int32 clamp from below: every element under the floor becomes the type's smallest value.
@register("floor_to_min")
struct FloorToMin:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.int32, rank=2, ...],
        input: InputTensor[dtype = DType.int32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        def f[width: Int](idx: Coord) {input} -> SIMD[DType.int32, width]:
            var x = input.load[width](idx)
            return x.lt(4).select(SIMD[DType.int32, width](Int32.MIN), x)

        foreach[target=target](f, output, ctx)


# A bool mask: which elements are odd (half of them False).
@register("is_odd")
struct IsOdd:
    @staticmethod
    def execute[
        target: StaticString,
    ](
        output: OutputTensor[dtype = DType.bool, rank=2, ...],
        input: InputTensor[dtype = DType.int32, rank=2, ...],
        ctx: DeviceContext,
    ) raises:
        def f[width: Int](idx: Coord) {input} -> SIMD[DType.bool, width]:
            return (input.load[width](idx) % 2).ne(0)

        foreach[target=target](f, output, ctx)
