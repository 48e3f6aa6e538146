"""A declared op's floor cases (harness.ops.derive): the floor shapes, each in every dtype with
what it does not fix picked by a stable hash, then the cover, apart, plain, widest-row,
index-width and leading-dims cases. Functions of the op (harness.ops.derive.op.DeclaredOp),
bound as its methods: a declaration's hooks and a subclass reach them through the op."""

from __future__ import annotations

import math

import torch

from harness.cases.case import Case, stable_least, stable_pick
from harness.ops import layouts, leading, strategies
from vocabulary import Backend

FLOOR_SIZES = (1, 2, 17, 31, 63, 64, 65, 127, 255, 256, 257, 1023, 1025, 4093, 4097, 8191)
# On a GPU also past 2^14, 2^15 and 2^16: libraries switch kernels at such sizes (Liger-Kernel's
# RMSNorm takes its multi-row block kernels at >= 32768 rows of <= 256 columns, its softmax a
# multi-block kernel past 65536 columns), and a path no case reaches is never verified
FLOOR_SIZES_GPU = (16385, 32769, 65537)
COMPANION = 7  # the other dims of a floor shape: small, prime, more than one row
APART_ELEMENTS = 4096  # the largest tensor of an apart case's shape, where a floor shape that small has every dim >= 2
# the CUDA floor's index-width cases (harness.ops.layouts): small shapes, one input stretched
INDEX_WIDTH_DTYPES = (torch.bfloat16, torch.float32)
INDEX_WIDTH_ROWS = (3, 4, 5)  # the dims that count rows
INDEX_WIDTH_INNER = (7, 17, 33)  # the row length


def floor_shapes(op, backend: str, dims: tuple[str, ...] | None = None,
                 base: dict[str, int] | None = None) -> list[dict[str, int]]:
    """Each of ``dims`` (default: the drawn ones) in turn at the floor sizes, the other drawn
    dims at ``base`` (default: COMPANION for each), within the backend's budget."""
    sizes = FLOOR_SIZES + (FLOOR_SIZES_GPU if backend == Backend.CUDA else ())
    base = base or {d: COMPANION for d in op.free_dims}
    shapes: list[dict[str, int]] = []
    for dim in op.free_dims if dims is None else dims:
        for s in sorted(set(sizes) | set(op.decl.special_sizes.get(dim, ()))):
            if s > op.max_size(dim, backend):
                continue
            shape = op.fit(dict(base, **{dim: s}), backend, keep=dim)
            if shape not in shapes:
                shapes.append(shape)
    return shapes


def declared_shapes(op, backend: str) -> list[dict[str, int]]:
    """The declaration's floor shapes by purpose (``OpDecl.floor_shapes``, and on CUDA
    ``floor_shapes_gpu``), as given, with its derived dims computed."""
    shapes = op.decl.floor_shapes + (op.decl.floor_shapes_gpu if backend == Backend.CUDA else ())
    return [op.complete(dict(s)) for s in shapes]


def floor_cases(op, *, backend: str) -> list[Case]:
    """Every floor shape in every dtype, each with a value kind, layout, scalars and ignored
    rows picked by a stable hash of the shape and dtype (``stable_pick``), then what the picks
    left out (``cover``), the plain cases, on CUDA the widest rows and the index-width cases,
    and the leading-dims cases. Nothing depends on a case's position: a floor that gains or
    loses a shape keeps every other case (only a cover case may become unneeded). A
    declaration's ``floor`` stands in for all of it."""
    if op.decl.floor is not None:
        return op.decl.floor(op, backend)
    shapes = op.floor_shapes(backend)
    shapes += [s for s in op.declared_shapes(backend) if s not in shapes]
    kinds = op.decl.value_kinds
    cases = []
    for dtype in strategies.DTYPES:
        picked = [op.picked(shape, dtype) for shape in shapes]
        cases += picked + op.cover(shapes, dtype, picked) + op.apart_cases(shapes, dtype)
        if op.ignorable is not None:  # every row ignored: torch's mean is NaN there
            for shape in shapes[:2]:
                scalars = {s.name: s.values[0] for s in op.scalars}
                cases.append(op.case(shape, dtype, "contiguous", kinds[0], scalars, "all"))
    cases += op.plain_cases(shapes, kinds, cases)
    if backend == Backend.CUDA:
        cases += op.widest_row_cases(shapes, kinds, cases)
        cases += op.index_width_cases()
    return unique(cases + op.leading_cases(backend))


def key(op, shape: dict[str, int]) -> str:
    return ",".join(f"{d}={shape[d]}" for d in op.dims if d in shape)


def picked(op, shape: dict[str, int], dtype: torch.dtype, kind: str | None = None,
           layout: str | None = None) -> Case:
    """The floor case of ``shape`` in ``dtype``: what is not given picked by the shape and dtype's
    hash. Ignored rows ("none" or "some") alternate over the dtypes of a shape from a start
    the shape picks: "some" ignores the last row on purpose, so a shape that only ever had
    "some" would never show a bug in its last rows (a row loop that stops a block early).
    A declaration's ``pick`` stands in for it."""
    if op.decl.pick is not None:
        return op.decl.pick(op, shape, dtype, kind, layout)
    key, name = op._key(shape), strategies.dtype_name(dtype)
    kind = kind or stable_pick(op.decl.value_kinds, op.name, key, name, "values")
    layout = layout or stable_pick(op.layouts, op.name, key, name, "layout")
    scalars = {s.name: stable_pick(s.values, op.name, key, name, s.name) for s in op.scalars}
    d = strategies.DTYPES.index(dtype) if dtype in strategies.DTYPES else 0
    ignored = ("none", "some")[(stable_pick(range(2), op.name, key, "ignored") + d) % 2]
    return op.case(shape, dtype, layout, kind, scalars, ignored)


def cover(op, shapes: list[dict[str, int]], dtype: torch.dtype, picked: list[Case],
          kinds: tuple[str, ...] | None = None) -> list[Case]:
    """For each value kind (of ``kinds``, default the declaration's) and each layout that no
    picked case of ``dtype`` has, one case that has it, on a shape its hash picks among those
    of more than one element."""
    roomy = [s for s in shapes if math.prod(s.values()) > 1] or shapes
    name = strategies.dtype_name(dtype)
    out = []
    for kind in op.decl.value_kinds if kinds is None else kinds:
        if all(c.get("values") != kind for c in picked):
            out.append(op.picked(stable_pick(roomy, op.name, name, kind), dtype, kind=kind))
    for layout in op.layouts:
        if all(c.get("layout") != layout for c in picked + out):
            out.append(op.picked(stable_pick(roomy, op.name, name, layout), dtype, layout=layout))
    return out


def apart_cases(op, shapes: list[dict[str, int]], dtype: torch.dtype) -> list[Case]:
    """A case of ``dtype`` in each apart layout (harness.ops.apart), in the declaration's first
    value kind (a kind of equal or zero rows could hide a row read with the wrong stride), on
    a shape picked by its hash (stable_least) among those with at least two elements along
    every dim (a row stride or a memory order matters only there), the most tensors of one
    shape (attention's q and k where S = T and Hq = Hkv) and, where it can, no tensor above
    APART_ELEMENTS elements."""
    if not op.apart_layouts:
        return []

    def tensor_shapes(shape: dict[str, int]) -> list[tuple[int, ...]]:
        return [tuple(shape[d] for d in dims) for dims in op.tensor_dims]

    def pairs(shape: dict[str, int]) -> int:
        counts = [tensor_shapes(shape).count(s) for s in set(tensor_shapes(shape))]
        return sum(c * (c - 1) // 2 for c in counts)

    spread = [s for s in shapes if all(s[d] >= 2 for d in op.dims if d in s)] or shapes
    most = max(map(pairs, spread))
    spread = [s for s in spread if pairs(s) == most]
    small = [s for s in spread if max(map(math.prod, tensor_shapes(s))) <= APART_ELEMENTS] or spread
    name = strategies.dtype_name(dtype)
    kind = op.decl.value_kinds[0]
    return [op.picked(stable_least(small, op._key, op.name, name, layout), dtype, kind=kind, layout=layout)
            for layout in op.apart_layouts]


def leading_cases(op, backend: str) -> list[Case]:
    """x[*lead, N] (harness.ops.leading) for an op declaring ``leading``, after every other floor case."""
    if op.leading is None:
        return []
    inner = next(iter(op.inner))
    kinds, out = op.decl.value_kinds, []
    for j, (lead, n, layout, dtype) in enumerate(leading.CASES):
        if layout in (layouts.MIXED, layouts.MIXED_ALT) and layout not in op.layouts:
            continue
        rows = math.prod(lead)
        sizes = op.complete({d: rows if d == op.leading else n if d == inner else COMPANION
                               for d in op.free_dims})
        scalars = {s.name: s.values[j % len(s.values)] for s in op.scalars}
        ignored = "some" if op.ignorable is not None else None
        out.append(op.case(sizes, dtype, layout, kinds[j % len(kinds)], scalars, ignored, lead=lead))
    return out


def widest_row_cases(op, shapes: list[dict[str, int]], kinds: tuple[str, ...], have: list[Case]) -> list[Case]:
    """On a GPU, the widest rows (the largest floor size of each row-length dim, where
    libraries take their multi-block paths) in every value kind, contiguous fp32: a hazard
    that only a kind brings (a first block of only -inf, a peak in a later block) must meet
    the path that only the widest rows reach, not by the rotation's luck. Liger-Kernel
    0.8.5's cross-entropy past 32768 classes is such a path (docs/findings.md)."""
    out = []
    for dim in sorted(op.inner):
        widest = max((sh for sh in shapes if sh[dim] > 1), key=lambda sh: sh[dim], default=None)
        if widest is None:
            continue
        present = {c.get("values") for c in have if all(int(c[d]) == widest[d] for d in op.dims)}
        for kind in (k for k in kinds if k not in present):
            scalars = {s.name: stable_pick(s.values, op.name, op._key(widest), kind, s.name) for s in op.scalars}
            ignored = "some" if op.ignorable is not None else None
            out.append(op.case(widest, torch.float32, "contiguous", kind, scalars, ignored))
    return out


def plain_cases(op, shapes: list[dict[str, int]], kinds: tuple[str, ...], have: list[Case]) -> list[Case]:
    """Each floor shape also as the plain case, contiguous fp32 (rows ignored where the op has
    an ignorable index), where the rotation above gave it none: every kernel takes that case,
    and many wrappers (or a carrier narrowed to what a library passes) take nothing else, so
    without it a size such as V = 1 or V = 32769 reaches them only by the rotation's luck."""
    def plain(c: Case) -> tuple:
        return tuple(c.get(d) for d in op.dims) + (c.get("layout"), c.get("dtype"), c.get("ignored"))

    present = {plain(c) for c in have}
    ignored = "some" if op.ignorable is not None else None
    out = []
    for shape in shapes:
        key = op._key(shape)
        scalars = {s.name: stable_pick(s.values, op.name, key, "plain", s.name) for s in op.scalars}
        case = op.case(shape, torch.float32, "contiguous", stable_pick(kinds, op.name, key, "plain"), scalars, ignored)
        if plain(case) not in present:
            out.append(case)
    return out


def index_width_cases(op) -> list[Case]:
    """Each float input and the upstream gradient stretched in turn by each index-width
    layout (a 1-D input only by index_width_rows: it has one stride), then each index tensor
    by index_width_rows, the others contiguous."""
    kinds = op.decl.value_kinds
    kind = "peaked" if "peaked" in kinds else kinds[0]
    cases, j = [], 0
    stretched = [(li, layout, k, name, dims) for li, layout in enumerate(layouts.INDEX_WIDTH_LAYOUTS)
                 for k, (name, dims) in enumerate(op.wide_inputs)]
    stretched += [(0, layouts.INDEX_WIDTH_ROWS, len(op.wide_inputs) + k, name, dims)
                  for k, (name, dims) in enumerate(op.wide_index)]
    for li, layout, k, name, dims in stretched:
        if layout == layouts.INDEX_WIDTH_COLS and len(dims) == 1:
            continue
        sizes = {d: (INDEX_WIDTH_INNER if d in op.inner else INDEX_WIDTH_ROWS)[j % 3] for d in op.free_dims}
        sizes = op.complete({d: max(1, min(n, op.max_size(d, "cuda"))) for d, n in sizes.items()})
        if sizes[dims[layouts.index_width_dim(layout, len(dims))]] < layouts.INDEX_WIDTH_MIN:
            continue  # the declaration caps that dim below what the layout needs
        scalars = {s.name: s.values[j % len(s.values)] for s in op.scalars}
        dtype = INDEX_WIDTH_DTYPES[(k + li) % len(INDEX_WIDTH_DTYPES)]  # each input meets both
        # no row ignored: the stretched rows' offsets past 2**31 are the last ones, which
        # "some" always ignores (a loss and gradient that never read them)
        cases.append(op.case(sizes, dtype, layout, kind, scalars, "none", wide=name))
        j += 1
    return cases


def unique(cases: list[Case]) -> list[Case]:
    """The floor without repeats, in order: two floor cases of the same parameters have the same
    seed (content_seed), so they are one case."""
    return list(dict.fromkeys(cases))
