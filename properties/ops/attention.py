"""The ``attention`` op: o = softmax(scale * q k^T, causal mask) v per head, with grouped heads.

Kernel signature: ``f(q[B, Hq, S, D], k[B, Hkv, T, D], v[B, Hkv, T, D], causal: bool,
scale: float) -> o[B, Hq, S, D]`` in q's dtype, differentiable in q, k and v; Hq is a multiple
of Hkv (query head h reads key/value head h // (Hq / Hkv): GQA, and MQA at Hkv = 1). Causal
aligns the diagonal to the bottom right: query i sees keys j <= i + T - S (decoding, S = 1,
sees every key; a chunk of S queries at the end of a T-long context sees its prefix). With
S > T the first S - T query rows see no key at all: their output is 0 and they pass no
gradient (FlashAttention's convention; oracles.attention), and the floor has such shapes on
purpose (an online softmax whose rescaling is not guarded for a row of -inf makes them NaN).
Checks: forward, dq, dk, dv, plus the common ones.

Cases (not derived dim by dim, since Hq is tied to Hkv and D to the head sizes models use):
the floor is a list of shapes (B, Hq, Hkv, S, T, D) chosen by purpose (decode S = 1, chunked
prefill S < T, S = T, S > T, S and T of 1, 17 and 257 around the interpreter's 16-wide blocks (S = T = 257 as the plain case only),
D = 40 to leave part of a 64-wide head tile masked, G = 1, 2, 3 and MQA), crossed with every
dtype, causal on and off in turn over each shape's dtypes, layouts, value kinds and scales in
turn, plus each shape as contiguous fp32; on a GPU also S and T of 1025 and past 4096, D = 128,
and the index-width cases (one input at a time with a stride just under 2**31). Layouts:
the engine's (contiguous, transposed = D-major, offset, permuted, mixed) plus ``bshd`` (each
tensor a [B, L, H, D] tensor viewed as [B, H, L, D], as a model's projections produce) and
``kv_cache`` (q as bshd, k and v the first T positions of a NaN-padded [B, H, T + 5, D] cache:
a kernel that reads a key past T reads NaN); per dtype also the apart layouts (harness.ops.apart:
q, k, v and do each with strides and a storage offset of their own), on a shape where all four
have one shape.

Value kinds (q and k drawn so that the scores have the size the kind names, whatever D and
scale; v is N(0, 1)):
- normal:          q, k ~ N(0, 1).
- large_logits:    scores ~ N(0, 60^2): exp(s) overflows fp32 without the running max.
- negative_logits: every score near -150 (q > 0, k < 0): a running max started at 0 instead
                   of -inf gives exp(s - 0) = 0 for every key, 0 / 0.
- ties:            q, k in {-1, 0, 1}: scores repeat, the max is reached many times.

Error model (harness.compare.rounding): per element, twice the spread of the float64 output
and gradients when q, k, v and do are each rounded within the input dtype, plus fp32
roundings of the terms (oracles.attention's magnitudes: the scores are sums over D whose
rounding exp turns into a relative error of p, the output a sum over T of p v, the gradients
cancel dp against Delta), their count growing with sqrt of the longer of D and T (``reduces``),
plus the output's rounding.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from hypothesis import strategies as st

from harness.cases.case import Case, stable_pick
from harness.errors import UsageError
from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.opspec import OpInputs
from harness.registry.registry import register_op
from oracles.attention import attention_backward_magnitudes, attention_forward_magnitudes, attention_reference
from harness.ops import apart, layouts, strategies, values
from harness.ops.derive import unique
from vocabulary import Backend

KINDS = ("normal", "large_logits", "negative_logits", "ties")
LARGE_SCORE = 60.0  # the scores' standard deviation under large_logits
NEGATIVE_SCORE = 150.0  # about the mean score under negative_logits
KV_CACHE_PAD = 5  # cache positions past T, NaN
LAYOUTS = ("contiguous", "bshd", "kv_cache", "transposed", "offset", "permuted", layouts.MIXED)
# under mixed, the tensors of one call in turn (q, k, v, then do)
MIXED_CYCLE = ("bshd", "kv_cache", "transposed", "offset")
SCALES = (0.125, 0.3)  # never 1: a scale applied twice must show

# (B, Hq, Hkv, S, T, D), by purpose
FLOOR_SHAPES = (
    (1, 1, 1, 1, 1, 16),  # the smallest: one query, one key
    (1, 2, 1, 1, 17, 32),  # decode over a short cache, MQA
    (1, 4, 2, 1, 257, 16),  # decode over a long cache, GQA: 17 key blocks, the last of one key
    (1, 2, 2, 17, 17, 40),  # D = 40 in a 64-wide tile; S = T one past a block
    (2, 3, 1, 17, 33, 64),  # chunked prefill, MQA with G = 3
    (1, 4, 2, 16, 16, 32),  # exactly one block each way
    (1, 2, 1, 33, 17, 16),  # S > T: the first 16 rows see no key under causal
    (1, 1, 1, 5, 257, 32),  # a small chunk at the end of a long context
    (1, 2, 2, 65, 64, 64),  # S = T + 1: one row without keys, at a block edge
    (3, 2, 2, 7, 7, 16),  # B = 3
    (1, 6, 2, 31, 47, 40),  # G = 3, nothing aligned
)
# only as the plain case (contiguous fp32, causal): 289 block pairs each way cost the interpreter
# a minute per case, so one case, not one per dtype
PLAIN_ONLY_SHAPES = ((1, 1, 1, 257, 257, 16),)  # S = T = 257
FLOOR_SHAPES_GPU = (
    (1, 8, 2, 1025, 1025, 128),
    (1, 4, 1, 1, 4097, 64),
    (2, 4, 4, 4099, 4099, 64),
    (1, 8, 2, 1000, 4100, 128),
)
DIMS = ("B", "Hq", "Hkv", "S", "T", "D")
HEAD_DIMS = {"interpreter": (16, 32, 40, 64), "cuda": (16, 32, 40, 64, 128)}
MAX_LENGTH = {"interpreter": 80, "cuda": 2048}  # S and T of generated cases
INDEX_WIDTH_SIZES = dict(B=3, Hq=4, Hkv=2, S=5, T=7, D=16)


def _terms(q, k, v, causal, scale, do):
    return (attention_forward_magnitudes(q, k, v, causal, scale), *attention_backward_magnitudes(q, k, v, causal, scale, do))


def sized_case(op, shape: tuple[int, ...], dtype, layout: str, kind: str, causal: bool, scale: float,
               seed: int | None = None, wide: str | None = None) -> Case:
    return op.case(dict(zip(DIMS, shape)), dtype, layout, kind, {"causal": causal, "scale": scale}, None, seed, wide=wide)


def pick(op, shape: dict[str, int], dtype, kind: str | None = None, layout: str | None = None) -> Case:
    """The floor case of ``shape`` in ``dtype``, picked by content (DeclaredOp.picked): layout,
    kind and scale by the shape and dtype, causal alternating over the dtypes of a shape."""
    key, name = op._key(shape), strategies.dtype_name(dtype)
    causal = (stable_pick(range(2), op.name, key, "causal") + strategies.DTYPES.index(dtype)) % 2 == 0
    return sized_case(op, tuple(shape[n] for n in DIMS), dtype, layout or stable_pick(LAYOUTS, op.name, key, name, "layout"),
                      kind or stable_pick(KINDS, op.name, key, name, "values"), causal,
                      stable_pick(SCALES, op.name, key, name, "scale"))


def floor(op, backend: str) -> list[Case]:
    shapes = [dict(zip(DIMS, s)) for s in FLOOR_SHAPES + (FLOOR_SHAPES_GPU if backend == Backend.CUDA else ())]
    cases = []
    for dtype in strategies.DTYPES:
        picked = [op.picked(shape, dtype) for shape in shapes]
        cases += picked + op.cover(shapes, dtype, picked) + op.apart_cases(shapes, dtype)
    have = {(tuple(int(c[n]) for n in DIMS), c["layout"], c["dtype"], c["causal"]) for c in cases}
    for shape in shapes + [dict(zip(DIMS, s)) for s in PLAIN_ONLY_SHAPES]:  # the plain case: contiguous fp32, causal
        size = tuple(shape[n] for n in DIMS)
        if (size, "contiguous", "float32", "true") not in have:
            key = op._key(shape)
            cases.append(sized_case(op, size, torch.float32, "contiguous", stable_pick(KINDS, op.name, key, "plain"),
                                    True, stable_pick(SCALES, op.name, key, "plain")))
    if backend == Backend.CUDA:
        cases += index_width_cases(op)
    return unique(cases)


def index_width_cases(op) -> list[Case]:
    """Each input (q, k, v, the upstream gradient) stretched in turn by each index-width layout."""
    shape = tuple(INDEX_WIDTH_SIZES[n] for n in DIMS)
    cases = []
    for li, layout in enumerate(layouts.INDEX_WIDTH_LAYOUTS):
        for k, (name, _) in enumerate(op.wide_inputs):
            dtype = (torch.bfloat16, torch.float32)[(k + li) % 2]
            cases.append(sized_case(op, shape, dtype, layout, "normal", (k + li) % 2 == 0, SCALES[k % 2], wide=name))
    return cases


def strategy(op, backend: str):
    top = MAX_LENGTH.get(backend, MAX_LENGTH["interpreter"])
    special = sorted(set(strategies.boundary_sizes(max_value=top, blocks=(16, 64))))

    @st.composite
    def cases(draw):
        hkv, g = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        s = draw(strategies.sizes(min_value=1, max_value=top, special=special))
        t = draw(strategies.sizes(min_value=1, max_value=top, special=special))
        shape = (draw(st.integers(1, 2)), hkv * g, hkv, s, t,
                 draw(st.sampled_from(HEAD_DIMS.get(backend, HEAD_DIMS["interpreter"]))))
        return sized_case(op, shape, draw(strategies.dtypes()), draw(st.sampled_from(LAYOUTS)),
                          draw(st.sampled_from(KINDS)), draw(st.booleans()), draw(st.sampled_from(SCALES)),
                          draw(strategies.seeds()))

    return cases()


def validate(op, case: Case) -> None:
    """Whole dims >= 1 and Hq a multiple of Hkv (the derived checks follow)."""
    sizes = {d: case.get(d) for d in DIMS}
    bad = next((d for d, n in sizes.items() if isinstance(n, bool) or not isinstance(n, int) or n < 1), None)
    if bad is not None:
        raise UsageError(f"--case {case.id}: {bad}={sizes[bad]} is not allowed; {bad} must be a whole number >= 1")
    if sizes["Hq"] % sizes["Hkv"]:
        raise UsageError(f"--case {case.id}: Hq={sizes['Hq']} is not a multiple of Hkv={sizes['Hkv']}; "
                         "pick Hq = G * Hkv")


def make_inputs(op, case: Case, device: str) -> OpInputs:
    b, hq, hkv, s, t, d = (int(case[n]) for n in DIMS)
    dtype = strategies.dtype_from_name(str(case["dtype"]))
    layout, kind = str(case["layout"]), str(case["values"])
    causal = op.decl.inputs[3].from_case(case["causal"])
    scale = float(case["scale"])
    gen = values.generator(int(case["seed"]))
    q, k = draw_scores(kind, (b, hq, s, d), (b, hkv, t, d), scale, gen)
    v = torch.randn((b, hkv, t, d), generator=gen, dtype=torch.float64)
    do = values.upstream((b, hq, s, d), gen)
    wide = case.get(layouts.WIDE)
    members = apart.Members()
    placed = [place(x.to(dtype), layout, n, name, wide, device, members.next(tuple(x.shape))[1])
              for n, (name, x) in enumerate((("q", q), ("k", k), ("v", v), (layouts.UPSTREAM, do)))]
    return OpInputs(args=(placed[0], placed[1], placed[2], causal, scale), grad_wrt=(0, 1, 2),
                    upstream=placed[3], dtype=dtype, layout=layout)


def draw_scores(kind: str, q_shape, k_shape, scale: float, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k (float64) whose scores scale * q . k have the size ``kind`` names (module docstring)."""
    d = q_shape[-1]
    if kind == "ties":
        return (torch.randint(-1, 2, q_shape, generator=gen).to(torch.float64),
                torch.randint(-1, 2, k_shape, generator=gen).to(torch.float64))
    q = torch.randn(q_shape, generator=gen, dtype=torch.float64)
    k = torch.randn(k_shape, generator=gen, dtype=torch.float64)
    if kind == "large_logits":
        c = math.sqrt(LARGE_SCORE / (scale * math.sqrt(d)))
        return q * c, k * c
    if kind == "negative_logits":  # E[(1 + |N|)]^2 = (1 + sqrt(2 / pi))^2 per term of the sum over D
        c = math.sqrt(NEGATIVE_SCORE / (scale * d * (1 + math.sqrt(2 / math.pi)) ** 2))
        return c * (1 + q.abs()), -c * (1 + k.abs())
    if kind != "normal":
        raise ValueError(f"unknown attention value kind {kind!r}; choose from {KINDS}")
    return q, k


def place(x: torch.Tensor, layout: str, n: int, name: str, wide: str | None, device: str, member: int = 0) -> torch.Tensor:
    """The n-th tensor of a call (q, k, v, then the upstream gradient) in ``layout``; ``member``:
    its index among the earlier tensors of its shape, for an apart layout (harness.ops.apart)."""
    if apart.is_apart(layout):
        return apart.place(x, layout, n, member, device)
    if layout in layouts.INDEX_WIDTH_LAYOUTS:
        return layouts.place(x, layouts.for_input(layout, n, name, wide), device)
    if layout == layouts.MIXED:
        layout = MIXED_CYCLE[n % len(MIXED_CYCLE)]
    if layout == "bshd" or (layout == "kv_cache" and name in ("q", layouts.UPSTREAM)):
        return x.transpose(1, 2).contiguous().to(device).transpose(1, 2)  # (clone would keep x's strides)
    if layout == "kv_cache":
        b, h, t, d = x.shape
        cache = torch.full((b, h, t + KV_CACHE_PAD, d), float("nan"), dtype=x.dtype, device=device)
        view = cache[:, :, :t]
        view.copy_(x.to(device))
        return view
    return layouts.place(x, layout, device)


DECL = OpDecl(
    name="attention",
    signature="f(q[B, Hq, S, D], k[B, Hkv, T, D], v[B, Hkv, T, D], causal: bool, scale: float) -> o[B, Hq, S, D]",
    inputs=(Tensor("q", "B, Hq, S, D"), Tensor("k", "B, Hkv, T, D"), Tensor("v", "B, Hkv, T, D"),
            Scalar("causal", (True, False)), Scalar("scale", SCALES)),
    output="B, Hq, S, D",
    reference=attention_reference,
    terms=_terms,
    reduces=("D", "T"),
    value_kinds=KINDS,
    doc=__doc__,
    # its own floor, strategy, layouts and value kinds (module docstring)
    dim_order=DIMS,
    layouts=LAYOUTS,
    floor=floor,
    pick=pick,
    strategy=strategy,
    make_inputs=make_inputs,
    validate=validate,
)

register_op(DECL)
