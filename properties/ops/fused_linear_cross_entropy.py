"""The ``fused_linear_cross_entropy`` op: cross_entropy(x @ weight.T, target, ignore_index).

Kernel signature: ``f(x[N, D], weight[V, D], target[N] int64, ignore_index=-100) -> scalar``
(x's dtype), the mean over rows whose target is not ignore_index, differentiable in x and
weight. Checks: loss (``all_ignored`` when every row is ignored: torch gives NaN there, and a
kernel returning 0 is reported under that name), dx, dweight, plus the common ones.

Case parameters: N, D, V; dtype; layout (applied to x, weight and target; on CUDA also the
index-width layouts of harness.ops.layouts, applied to the one input named by ``wide``, x,
weight or target, the others contiguous); ``values`` (how the logits are distributed, below);
``ignored`` (none, some, all rows); ignore_index (-100, -1, or a valid class id such as 0 or
V-1, which torch allows); seed (inputs and the upstream gradient, a random scalar of size
0.5..3.5 and random sign, never 1).

Value kinds: normal (logits ~ N(0, 1)); large (logits ~ 100: exp overflows without the
max subtraction); confident (the target logit dominates by ~30: the loss cancels to ~0);
tiny (logits ~ 1e-3: a near-uniform softmax); mixed_scale (row scales 1e-2..1e2); ascending
(logits grow with the class index, so the running max rises in every later vocabulary tile:
an online softmax that forgets to rescale its running sum is always wrong there); offset (logits
~ c + 4 N(0, 1), c = 2 / u of a 16-bit dtype (512 bf16, 4096 fp16; 1024 in fp32), the offset
spread evenly over a long D: the softmax is invariant to it, but a logit rounded to the 16-bit
dtype is off by up to u c = 2, while a rounding of the inputs moves each logit by only about
u c / sqrt(D): a kernel that keeps its logits in the input dtype is wrong there by several times
the allowance on every machine, whatever its GEMM's accumulation order). ``offset`` is a floor kind at D = 2048 (SHAPES_OFFSET), in every dtype;
the picks and the generated cases draw from the other six, where D is too short for it.

Error model (harness.compare.rounding), as for every declared op: twice the spread of the float64
loss and gradients when x, weight and the upstream gradient are rounded within the input dtype, plus
fp32 roundings of the terms (oracles.fused_linear_ce's magnitudes: the logits are sums over D, the
loss cancels logsumexp against the target logit, dx and dweight sum p - onehot over V and N), their
count growing with sqrt of the longer of D and V (``reduces``), plus the output's rounding. For a
kernel that keeps G = p - onehot, or a gradient computed for an upstream of 1, in the input dtype
(``Contract(precision="input")``), the terms also carry the dtype's smallest normal (``tiny``) on
each G element: below it a rounding is off by the subnormals' spacing, not by a fraction of the
value. Any kernel may round a gradient computed for an upstream of 1 to the input dtype before
the upstream scales it (Liger-Kernel's pattern): ``rounded_terms`` adds u tiny |upstream|.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from harness.cases.case import Case, stable_pick
from harness.compare import rounding
from harness.registry.declare import Index, OpDecl, Scalar, Tensor
from harness.registry.opspec import OpInputs
from harness.registry.registry import register_op
from oracles.fused_linear_ce import (fused_linear_ce_backward, fused_linear_ce_magnitudes, fused_linear_ce_reference,
                                     fused_linear_ce_rounded_gradients)
from harness.ops import layouts, strategies, values
from harness.ops.derive import unique
from vocabulary import Backend

PICKED_KINDS = ("normal", "large", "confident", "tiny", "mixed_scale", "ascending")
VALUE_KINDS = PICKED_KINDS + ("offset",)
IGNORED = ("none", "some", "all")

# Tiles of the project kernel are 64 (fp32, and every dtype in the interpreter) or 128
# (fp16/bf16 on the GPU) rows and vocabulary entries, 32 or 64 hidden; sizes around them and
# the backward's 16-row minimum chunk.
SPECIAL_N = (1, 2, 3, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129)
SPECIAL_D = (1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 129)
SPECIAL_V = (1, 2, 63, 64, 65, 127, 128, 129, 255, 256, 257, 383, 385)
LIMITS = {  # (max N, max D, max V, max N*V): the interpreter runs programs one after another
    "interpreter": (160, 160, 600, 1 << 14),
    "cuda": (4096, 4096, 32768, 1 << 24),
}

# The regression floor: shapes (N, D, V) named by purpose.
SHAPES_EDGE = [(1, 1, 1), (1, 40, 129)]  # one class (loss 0); one row, V = tile + 1
SHAPES_NOALIGN = [(37, 65, 257), (17, 33, 63)]  # D and V not multiples of their tiles
SHAPES_ALIGNED = [(64, 64, 256)]  # every dimension a multiple of the tiles
SHAPES_CHUNKED = [(96, 24, 300)]  # V >> D: the backward runs six row chunks
SHAPES_WIDE_VOCAB = [(5, 16, 2051)]  # V = 2 * 1024 + 3: a row's softmax walks three 1024-wide tiles
SHAPES_GPU_CONCURRENCY = [
    (4096, 64, 4096, torch.bfloat16, "ascending"),
    (4096, 96, 1000, torch.float32, "normal"),
    (4099, 80, 2051, torch.float16, "mixed_scale"),
]
# CUDA only: V one past the power-of-two tile caps of row-wise softmax kernels (32768, 65536): the
# strategy stops at V = 32768, so without these a kernel whose vocabulary loop drops its last,
# one-element tile is never run there; contiguous fp32 with rows ignored (every kernel takes it)
SHAPES_GPU_WIDE_V = [(7, 17, 32769), (3, 9, 65537)]
# x, weight and target in different layouts in one call (harness.ops.layouts.MIXED): x and weight
# share their row length D, so a kernel that indexes one with the other's strides needs this
SHAPES_MIXED = SHAPES_EDGE[1:] + SHAPES_NOALIGN
# the offset kind (module docstring): a long D that the offset spreads over, a few rows and classes
SHAPES_OFFSET = [(64, 2048, 37)]
SHAPES_ALL_IGNORED = [(17, 33, 63), (3, 2, 1)]  # every row ignored; also with a single class
# CUDA only: x or weight stretched by an index-width layout (harness.ops.layouts): (N, D, V) with
# at least 3 elements along the stretched dimension (N or V for rows, D for columns)
SHAPES_INDEX_WIDTH = [(3, 17, 7), (5, 7, 33), (4, 33, 17), (5, 17, 5)]
INDEX_WIDTH_DTYPES = (torch.bfloat16, torch.float32)
WIDE_INPUTS = ("x", "weight", "target")  # target: 1-D, index_width_rows only (17 GB of int64)
IGNORE_INDEX = (-100, -1, 0)


def flce_case(op, n: int, d: int, v: int, dtype, layout: str, kind: str, ignored: str, ignore_index: int,
              seed: int | None = None, wide: str | None = None) -> Case:
    return op.case({"N": n, "D": d, "V": v}, dtype, layout, kind, {"ignore_index": ignore_index}, ignored, seed,
                     wide=wide)


def pick(op, shape: dict[str, int], dtype, kind: str | None = None, layout: str | None = None) -> Case:
    """The floor case of ``shape`` in ``dtype``, picked by content (DeclaredOp.picked): layout,
    kind and ignore_index by the shape and dtype, none / some ignored rows alternating over
    the dtypes of a shape (a single row: none)."""
    n, d, v = (shape[k] for k in ("N", "D", "V"))
    key, name = op._key(shape), strategies.dtype_name(dtype)
    start = stable_pick(range(2), op.name, key, "ignored")
    ignored = ("none", "some")[(start + strategies.DTYPES.index(dtype)) % 2] if n > 1 else "none"
    return flce_case(op, n, d, v, dtype, layout or stable_pick(strategies.LAYOUTS, op.name, key, name, "layout"),
                          kind or stable_pick(PICKED_KINDS, op.name, key, name, "values"), ignored,
                          stable_pick(IGNORE_INDEX + (v - 1,), op.name, key, name, "ignore_index"))


def floor(op, backend: str) -> list[Case]:
    def sized(table):
        return [dict(N=n, D=d, V=v) for n, d, v in table]

    shapes = sized(SHAPES_EDGE + SHAPES_NOALIGN + SHAPES_ALIGNED + SHAPES_CHUNKED + SHAPES_WIDE_VOCAB)
    cases = []
    for dtype in strategies.DTYPES:
        picked = [op.picked(shape, dtype) for shape in shapes]
        picked += [op.picked(shape, dtype, layout=layouts.MIXED) for shape in sized(SHAPES_MIXED)]
        cases += picked + op.cover(shapes, dtype, picked, kinds=PICKED_KINDS)
        cases += [op.picked(shape, dtype, kind="offset") for shape in sized(SHAPES_OFFSET)]
        for n, d, v in SHAPES_ALL_IGNORED:
            cases.append(flce_case(op, n, d, v, dtype, "contiguous", "normal", "all", -100))
    if backend == Backend.CUDA:
        # Many programs at once, only affordable on a GPU: 4096 rows make the forward's programs
        # walk several vocabulary tiles each (the online rescale of the running sum matters:
        # ascending logits raise the max tile after tile), and make the dW work of many row
        # blocks overlap in time, where a missing atomic or barrier loses updates.
        for n, d, v, dtype, kind in SHAPES_GPU_CONCURRENCY:
            cases.append(flce_case(op, n, d, v, dtype, "contiguous", kind, "some", -100))
        for n, d, v in SHAPES_GPU_WIDE_V:
            cases.append(flce_case(op, n, d, v, torch.float32, "contiguous", "normal", "some", -100))
        # index-width cases: x, then weight, with a row (then column) stride such that an
        # offset computed in int32 passes 2**31 elements, then the target; every row counts (none ignored)
        j = 0
        stretched = [(li, layout, k, wide) for li, layout in enumerate(layouts.INDEX_WIDTH_LAYOUTS)
                     for k, wide in enumerate(WIDE_INPUTS[:2])]
        # then the target (T + row * stride_t): its 1-D view has one stride
        stretched += [(0, layouts.INDEX_WIDTH_ROWS, 2, "target")]
        for li, layout, k, wide in stretched:
            n, d, v = SHAPES_INDEX_WIDTH[j % len(SHAPES_INDEX_WIDTH)]
            dtype = INDEX_WIDTH_DTYPES[(k + li) % len(INDEX_WIDTH_DTYPES)]
            cases.append(flce_case(op, n, d, v, dtype, layout, "normal", "none", -100, wide=wide))
            j += 1
    return unique(cases)


def strategy(op, backend: str):
    max_n, max_d, max_v, max_nv = LIMITS.get(backend, LIMITS["interpreter"])

    @st.composite
    def cases(draw):
        v = draw(strategies.sizes(max_value=max_v, special=SPECIAL_V))
        d = draw(strategies.sizes(max_value=max_d, special=SPECIAL_D))
        n = draw(strategies.sizes(max_value=max_n, special=SPECIAL_N))
        n = max(1, min(n, max_nv // v))
        ignored = draw(st.sampled_from(IGNORED if n > 1 else ("none", "all")))
        ii = draw(st.sampled_from(IGNORE_INDEX + (v - 1,)))
        return flce_case(op, n, d, v, draw(strategies.dtypes()), draw(st.sampled_from(op.layouts)),
                              draw(st.sampled_from(PICKED_KINDS)), ignored, ii, draw(strategies.seeds()))

    return cases()


def make_inputs(op, case: Case, device: str) -> OpInputs:
    """The declaration's inputs, with x and weight drawn together so that the logits x @ weight.T
    follow the case's value kind, and rows ignored as ``ignored`` says."""
    n, d, v = int(case["N"]), int(case["D"]), int(case["V"])
    dtype = strategies.dtype_from_name(str(case["dtype"]))
    layout, kind, ii = str(case["layout"]), str(case["values"]), int(case["ignore_index"])
    wide = case.get(layouts.WIDE)
    gen = values.generator(int(case["seed"]))
    classes = target_classes(n, v, ii, gen)
    ignored = ignored_rows(str(case["ignored"]), n, gen)
    target = torch.where(ignored, torch.full_like(classes, ii), classes)
    x, w = logit_inputs(kind, classes, d, v, gen, dtype)
    u = (0.5 + 3.0 * torch.rand((), generator=gen, dtype=torch.float64)) * (1 if torch.rand((), generator=gen) < 0.5 else -1)
    return OpInputs(
        args=(
            layouts.place(x.to(dtype), layouts.for_input(layout, 0, "x", wide), device),
            layouts.place(w.to(dtype), layouts.for_input(layout, 1, "weight", wide), device),
            layouts.place(target, layouts.for_input(layout, 2, "target", wide), device),
            ii,
        ),
        grad_wrt=(0, 1),
        upstream=u.to(dtype).to(device),
        dtype=dtype,
        layout=layout,
    )


DECL = OpDecl(
    name="fused_linear_cross_entropy",
    signature="f(x[N, D], weight[V, D], target[N] int64, ignore_index=-100) -> scalar",
    inputs=(Tensor("x", "N, D"), Tensor("weight", "V, D"), Index("target", "N", high="V", ignore="ignore_index"),
            Scalar("ignore_index", IGNORE_INDEX)),
    output="",
    reference=fused_linear_ce_reference,
    backward=lambda x, w, target, ignore_index, dy: fused_linear_ce_backward(x, w, target, dy, ignore_index),
    terms=lambda x, w, target, ignore_index, dy, tiny: fused_linear_ce_magnitudes(x, w, target, dy, ignore_index, tiny),
    # the gradients rounded to the input dtype before the upstream scales them (Liger's pattern)
    rounded_terms=lambda x, w, target, ignore_index, dy, tiny: fused_linear_ce_rounded_gradients(x, w, dy, tiny),
    reduces=("D", "V"),
    value_kinds=VALUE_KINDS,
    forward_check="loss",
    doc=__doc__,
    # its own floor (shapes by purpose, around the project kernel's tiles), size limits and logits
    # (module docstring); the error model, oracle, checks and case parameters are the declaration's
    floor=floor,
    pick=pick,
    strategy=strategy,
    make_inputs=make_inputs,
)


register_op(DECL)


def target_classes(n: int, v: int, ignore_index: int, gen: torch.Generator) -> torch.Tensor:
    """Random classes in [0, V) other than ignore_index, with class 0 and class V-1 each hit
    by some row when the batch has room (and they are not the ignore_index)."""
    allowed = torch.tensor([c for c in range(v) if c != ignore_index] or [0], dtype=torch.int64)
    t = allowed[torch.randint(len(allowed), (n,), generator=gen)]
    order = torch.randperm(n, generator=gen)
    edge = [c for c in (0, v - 1) if c != ignore_index]
    for row, c in zip(order.tolist(), edge[: max(0, n - 1)] if n > 1 else []):
        t[row] = c
    return t


def ignored_rows(which: str, n: int, gen: torch.Generator) -> torch.Tensor:
    if which == "none":
        return torch.zeros(n, dtype=torch.bool)
    if which == "all":
        return torch.ones(n, dtype=torch.bool)
    if which != "some":
        raise ValueError(f"unknown 'ignored' value {which!r}; choose from {IGNORED}")
    rows = torch.rand(n, generator=gen) < 0.3
    order = torch.randperm(n, generator=gen)
    rows[order[0]] = True
    if n > 1:
        rows[order[1]] = False
    return rows


def offset_logit(dtype: torch.dtype) -> float:
    """The offset kind's common logit: where the 16-bit dtype's spacing is 4, the logits' spread
    (so that a rounding of the logits moves them apart, not all onto one value), 1024 in fp32."""
    return 2.0 / rounding.unit_roundoff(dtype) if dtype in (torch.float16, torch.bfloat16) else 1024.0


def logit_inputs(kind: str, classes: torch.Tensor, d: int, v: int, gen: torch.Generator,
                 dtype: torch.dtype = torch.float32):
    """x [N, D] and w [V, D] in float64 whose logits x @ w.T follow ``kind`` (the offset kind's
    size depends on the case's ``dtype``)."""
    if kind not in VALUE_KINDS:
        raise ValueError(f"unknown value kind {kind!r}; choose from {VALUE_KINDS}")
    n = classes.shape[0]
    w = torch.randn((v, d), generator=gen, dtype=torch.float64) / math.sqrt(d)
    x = torch.randn((n, d), generator=gen, dtype=torch.float64)
    if kind == "large":
        x *= 10.0
        w *= 10.0
    elif kind == "confident":
        x = 30.0 * w[classes] / w[classes].square().sum(1, keepdim=True).clamp(min=1e-3) + 0.3 * x / math.sqrt(d)
    elif kind == "tiny":
        x *= 1e-3
    elif kind == "ascending":
        x[:, 1:] *= 0.3
        x[:, 0] = 1.0
        w[:, 0] = 8.0 * torch.arange(v, dtype=torch.float64) / max(v - 1, 1)
    elif kind == "offset":  # x ~ 1, w ~ c / D + 4 N(0, 1) / sqrt(D): z ~ c + 4 N(0, 1)
        x = 1.0 + 0.05 * x
        w = offset_logit(dtype) / d + 4.0 * w
    elif kind == "mixed_scale":
        x *= torch.logspace(-2, 2, n, dtype=torch.float64)[torch.randperm(n, generator=gen)].unsqueeze(1)
    return x, w
