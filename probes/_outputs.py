"""What a kernel's outputs show by experiment, for the kernel probe: whether they follow the inputs at all, whether
the op adds into them, whether the same inputs give the same outputs, and whether parts stay unwritten.

One verdict per kernel, whatever the buffer the op was handed happened to hold: MAX 26.7's CPU path gives the op a
buffer of its own (fresh zeros one call, a reused allocation with leftovers the next) and copies it back, so what
an output never written reads as changes from run to run. The experiments below do not depend on it:
- the same call on other inputs (every float input's values rearranged, not in the same order): an output that
  follows its inputs changes, one that is never written (or written with a constant) does not;
- the same call again on outputs that start zeroed or holding the result before: an op that adds into its output
  gives a multiple of the result; one that races or reads memory it did not write gives other values.
Kept compatible with Python 3.8, like the harness (a probe runs in whatever interpreter is examined).
"""

# How each output starts in the calls after the first (which starts at the first marker): zeroed, or holding the
# result before. Several, because MAX 26.7's CPU path shows an op adding into its output only once it hands back a
# buffer that held an earlier result (by the third or fourth call).
REPEATS = ("zeros", "before", "zeros", "before", "zeros")
# How the calls on other inputs start: the first marker (never written stays the marker), then zeroed.
OTHER_STARTS = ("marker", "zeros")
# The starts that fill outputs with a marker, and which of the dtype's two markers each uses.
MARKERS = {"marker": 0, "marker2": 1}


def fill_value(torch, dtype, which=0):
    """What outputs hold before a call, so that an output the kernel never writes is seen. Two markers per dtype,
    one for each of two calls on the same inputs: an element is unwritten only if it holds each call's own marker
    (a kernel computes the same value both times, so it cannot hold both). One marker alone cannot tell "not
    written" from "computed that value": uint8's smallest value is a black pixel.
    Floats: NaN, then -inf; integers: the smallest, then the largest value; bool: False, then True."""
    if dtype.is_floating_point:
        return (float("nan"), float("-inf"))[which]
    if dtype == torch.bool:
        return (False, True)[which]
    info = torch.iinfo(dtype)
    return (info.min, info.max)[which]


def marked(torch, tensor, which=0):
    """Which elements hold marker ``which`` (a bool tensor)."""
    fill = fill_value(torch, tensor.dtype, which)
    if tensor.dtype.is_floating_point and fill != fill:
        return torch.isnan(tensor)
    return tensor == fill


def unwritten_elements(torch, first, second):
    """Which elements held the first marker after the call that started there and the second after the call that
    started there (a bool tensor): those the kernel did not write. For a bool output, also each element whose byte
    is neither 0 nor 1 in either call, whatever the markers did."""
    return (marked(torch, first, 0) & marked(torch, second, 1)) | never_a_bool(torch, first) | never_a_bool(
        torch, second
    )


def never_a_bool(torch, tensor):
    """Which elements of a bool tensor hold a byte that is neither 0 (False) nor 1 (True): no kernel writes such a
    byte, so each is what the memory held, never written (all False for other dtypes). A bool has two values, so the
    two markers say nothing where the op is handed a buffer of MAX's own (its CPU path, every call; CUDA's, zeroed):
    the caller's False and True never reach it. Its storage byte has 256 values, and leftovers show there."""
    if tensor.dtype != torch.bool:
        return torch.zeros(tensor.shape, dtype=torch.bool)
    return tensor.contiguous().view(torch.uint8) > 1


def other_values(torch, tensor):
    """Other values for a float input: quarter-steps in another order than the input's (not a monotone function of
    it, so a sort, an argmax or a reduction sees them differ too), none equal to gpudoctor's default values.
    Inputs of other dtypes are kept: their values may be indices, and other values could fall outside a table."""
    if not tensor.dtype.is_floating_point:
        return tensor
    count = tensor.numel()
    steps = (torch.arange(count, dtype=torch.float64) * 5 + 2) % 13
    other = (steps - 6.5) / 4  # eighths between -1.625 and 1.375: exact in every float dtype
    return other.reshape(tensor.shape).to(tensor.dtype).to(tensor.device)


def _markers(torch, dtype):
    """The two markers, as a sentence says them."""
    return "%r in one, %r in the other" % (fill_value(torch, dtype, 0), fill_value(torch, dtype, 1))


def has_float_input(inputs):
    return any(t.dtype.is_floating_point for t in inputs)


def _same_elements(torch, a, b):
    """Which elements of ``a`` and ``b`` are the same (NaN equals NaN; floats within a rounding step)."""
    if a.dtype.is_floating_point:
        return torch.isclose(a.to(torch.float64), b.to(torch.float64), rtol=1e-6, atol=0, equal_nan=True)
    return a == b


def _same(torch, a, b):
    return bool(_same_elements(torch, a, b).all())


def _varying(torch, tensors):
    """Which elements are not the same in every tensor of ``tensors`` (a bool tensor)."""
    varies = torch.zeros(tensors[0].shape, dtype=torch.bool)
    for later in tensors[1:]:
        varies |= ~_same_elements(torch, tensors[0], later)
    return varies


def accumulated(torch, a, b):
    """The whole-number factor (2, 3, ...) by which ``a`` is ``b`` added to itself in at least half of the elements
    where ``b`` is not 0, else None: an output added into more than once (MAX 26.7's CPU path can hand back a buffer
    partly reused, so not every element need show it)."""
    a, b = a.to(torch.float64).flatten(), b.to(torch.float64).flatten()
    keep = torch.isfinite(a) & torch.isfinite(b) & (b != 0)
    if int(keep.sum()) == 0:
        return None
    ratios = a[keep] / b[keep]
    whole = torch.isclose(ratios, ratios.round(), rtol=0, atol=1e-6) & (ratios.round() >= 2)
    if int(whole.sum()) * 2 < int(keep.sum()):
        return None
    return int(ratios[whole].round().mode().values)


class Evidence(object):
    """The calls' outputs for one call of the spec: ``same`` on the given inputs (the first started at the first
    marker, the rest as REPEATS say), ``remarked`` on the given inputs started at the second marker, ``other`` on
    other inputs (as OTHER_STARTS say; empty without a float input)."""

    def __init__(self, same, other, remarked):
        self.same = same
        self.other = other
        self.remarked = remarked

    def unwritten(self, torch, index):
        """Which elements of output ``index`` the kernel did not write in the two calls started at the markers."""
        return unwritten_elements(torch, self.same[0][index], self.remarked[index])


def gather(torch, call, inputs, first):
    """Make the experiments' calls: ``call(inputs, start, before)`` calls the op once and returns its outputs on the
    CPU; ``first`` is the first call's outputs (started at the marker)."""
    same = [first]
    for start in REPEATS:
        same.append(call(inputs, start, same[-1]))
    other = []
    if has_float_input(inputs):
        moved = [other_values(torch, t) for t in inputs]
        for start in OTHER_STARTS:
            other.append(call(moved, start, other[-1] if other else None))
    # Last, so the calls before it (and what MAX's CPU path hands back in them) are as they always were.
    remarked = call(inputs, "marker2", None)
    return Evidence(same, other, remarked)


class Verdict(object):
    """What the outputs show: ``detail`` (the result's detail key), ``sentence`` (the evidence, one line), and
    ``fatal``: True for what stops the run at once (the op adds into its output, or is not repeatable), False for
    a result that looks wrong (saved as the CPU run's, then failed, so a GPU run is not compared with it)."""

    def __init__(self, detail, sentence, fatal):
        self.detail = detail
        self.sentence = sentence
        self.fatal = fatal


def _ignores_inputs(torch, what, evidence, index, device):
    """A Verdict when output ``index`` does not follow the inputs: on other inputs it changed in fewer than half of
    its elements, not counting those that change between calls on the same inputs anyway (leftovers)."""
    same = [r[index] for r in evidence.same]
    other = [r[index] for r in evidence.other]
    changed = ~_same_elements(torch, same[0], other[0]) | ~_same_elements(torch, same[1], other[1])
    anyway = _varying(torch, same) | _varying(torch, other)
    follows = int((changed & ~anyway).sum())
    count = same[0].numel()
    if follows * 2 >= count and follows > 0:
        return None
    if int(evidence.unwritten(torch, index).sum()) == count:
        shown = "it was never written: it still holds %s, the value gpudoctor filled it with before each call" \
            % _markers(torch, same[0].dtype)
    elif all(not bool((t != 0).any()) for t in same + other):
        shown = "it is all zeros after every call, for different inputs (on %s MAX 26.7 hands the op a zeroed " \
            "buffer of its own, so an output never written and one written with zeros look the same)" % device
    else:
        shown = "it holds what its buffer held before, not values computed from the inputs: %d of %d elements " \
            "changed between calls on the same inputs and %d with the inputs" % (
                int(anyway.sum()), count, follows)
    return Verdict(
        "ignores_inputs",
        "%s does not follow the inputs: called again with its float inputs' values rearranged, %s "
        "(if this output is right for any input, give a reference to check against)" % (what, shown),
        False,
    )


def judge(torch, evidence, label, call_has_reference, device, inputs_nonzero):
    """The first thing the outputs show, in the order that keeps one verdict per kernel (``label(index, tensor)``
    names an output), or None. An op that adds into its output first (its first result can look right), then an
    output that does not follow its inputs (never written, or a constant), then one left partly unwritten, then one
    the same inputs do not reproduce (a race, or reads of memory nobody wrote). Without a float input to vary, an
    all-zero output from inputs that are not is what says the op computed nothing."""
    outputs = range(len(evidence.same[0]))
    for index in outputs:
        seen = [r[index] for r in evidence.same]
        zeroed = seen[1]
        factors = [f for f in (accumulated(torch, later, zeroed) for later in seen[2:]) if f]
        factors += [f for f in (accumulated(torch, seen[1], seen[0]),) if f]
        if _same(torch, seen[0], seen[1]) and not bool(_varying(torch, seen[1:]).any()):
            continue
        if factors:
            return Verdict(
                "accumulates_into_output",
                "%s accumulates into its output: called again on the same inputs, it gave %d times the result "
                "(the kernel reads its output before writing it, `+=` without zeroing it first)"
                % (label(index, zeroed), factors[0]),
                True,
            )
    if evidence.other and not call_has_reference:
        for index in outputs:
            found = _ignores_inputs(torch, label(index, evidence.same[0][index]), evidence, index, device)
            if found is not None:
                return found
    for index in outputs:
        # An element the kernel does not write holds what the caller put there, whatever it was: each call's own
        # marker. One the kernel writes holds the same value in both calls, so it cannot hold both markers (a NaN
        # the kernel computes, from memory it should not read, stays NaN in the second call too).
        first = evidence.same[0][index]
        left = int(evidence.unwritten(torch, index).sum())
        if left:
            markers = _markers(torch, first.dtype)
            if left == first.numel():
                sentence = "%s was never written: every element still holds the value gpudoctor filled it with " \
                    "before each of two calls (%s)" % (label(index, first), markers)
            else:
                sentence = "%s: %d of %d elements were not written: they still hold the value gpudoctor filled " \
                    "the output with before each of two calls (%s)" % (label(index, first), left, first.numel(),
                                                                        markers)
            return Verdict("output_unwritten", sentence, False)
    for index in outputs:
        seen = [r[index] for r in evidence.same]
        varies = _varying(torch, seen[1:]) | ~_same_elements(torch, seen[0], seen[1])
        if bool(varies.any()) and not evidence.other:
            # Nothing showed that the output follows its inputs (no float input to vary): elements the kernel never
            # writes change from call to call too where the op gets a buffer of its own (MAX 26.7's CPU path), so
            # the evidence cannot tell a race from an output left unwritten — say both, and what would decide.
            return Verdict(
                "output_changes",
                "%s is not the same for the same inputs: %d of %d elements changed from call to call. Either the "
                "kernel does not write them (on %s what they hold is what the buffer held) or threads race over "
                "them; with no float input to vary, gpudoctor cannot tell which (a run on a GPU, where unwritten "
                "elements keep gpudoctor's markers, or a reference tells them apart)"
                % (label(index, seen[1]), int(varies.sum()), seen[1].numel(), device),
                True,
            )
        if bool(varies.any()):
            return Verdict(
                "not_repeatable",
                "%s is not the same for the same inputs: %d of %d elements changed from call to call while the "
                "output follows its inputs (a race between threads, or reads of memory the kernel did not write)"
                % (label(index, seen[1]), int(varies.sum()), seen[1].numel()),
                True,
            )
    if evidence.other or call_has_reference or not inputs_nonzero:
        return None
    for index in outputs:
        first = evidence.same[0][index]
        # Every call, not the first alone; a bool output too (all False): where the op is handed a zeroed buffer of
        # MAX's own, an output never written reads so whatever the caller filled it with, as an integer's reads 0.
        if first.numel() > 1 and not any(bool((r[index] != 0).any()) for r in evidence.same):
            zeros = "all False" if first.dtype == torch.bool else "all zeros"
            return Verdict(
                "output_all_zero",
                "%s is %s after every call though the inputs are not: the kernel looks like it computed nothing "
                "(where MAX hands the op a zeroed buffer of its own, an output never written reads so; if this is "
                "right, give a reference to check against)" % (label(index, first), zeros),
                False,
            )
    return None
