"""Place a tensor's values in memory with a given layout, inside a storage padded with NaN.

The padding makes two bug classes visible: a kernel that reads outside the view (wrong stride,
missing offset) reads NaN, and one that writes outside it changes bytes the
``inputs_unchanged`` check compares.

- contiguous:  a fresh contiguous tensor.
- transposed:  2-D: the transpose of a contiguous [N, M] tensor (column stride M).
               1-D: every other element of a larger tensor (stride 2).
- col_sliced:  2-D: columns 3 .. 3+N of a wider [M, N+7] tensor (row stride N+7).
               1-D: a slice starting at element 3 of a longer tensor.
- offset:      contiguous, but starting 5 elements into a larger storage.
- permuted:    3-D and more: the dimensions of a contiguous tensor in reverse order, viewed back
               (every stride differs from the contiguous one); 1-D and 2-D: as transposed.
               Only declared ops with a 3-D or larger input draw it (PERMUTED_LAYOUTS).
- mixed:       the tensors of one call in different layouts (the k-th input of a case in
               MIXED_CYCLE[k % 4], the upstream gradient transposed), for every op with two or
               more tensors, the upstream gradient counted: a kernel that indexes one tensor with
               another's strides (copied argument lists, dy read with x's strides) passes every
               case whose tensors share a layout.
- mixed_alt:   as mixed, but the upstream gradient col_sliced: under mixed it shares input 1's
               layout (transposed), here both of its strides differ from input 1's; for ops with
               two or more tensor inputs and an upstream gradient.
3-D and larger tensors are transposed in their last two dimensions and column-sliced in the last.
Tensors of one shape under these layouts still share strides (mixed: in memory order only, undone by
a wrapper's ``.contiguous()``): harness.ops.apart gives each tensor of a call strides of its own.

Index-width layouts (GPU only: the CUDA floor's cases, never the interpreter's nor a hypothesis
strategy's). A kernel that computes an element offset in int32 (``X + row * stride`` with both
int32) overflows once the offset passes 2**31 elements (Liger-Kernel issues #251 and #803).
These views keep their small logical shape and get one huge stride, S = ceil(INDEX_WIDTH / (d - 1))
+ a small pad, made odd, for the d elements along that dimension: the largest offset (d - 1) * S
passes INDEX_WIDTH while S itself stays below it, so Triton passes S as an int32 argument (it
passes an int below 2**31 as int32) and int32 arithmetic on it overflows, while a kernel that
casts the index to int64 first is right. d >= 3 (with d = 2, S would be 2**31 or more, which
Triton passes as int64). The storage, (d - 1) * S + the other dims' extent elements, is filled
with NaN (integers: -1) and the values copied into the view:
- index_width_rows: 2-D [M, N]: row stride S, column stride 1 (M >= 3). 3-D and more: the
                    leading dimension strided by S, the others contiguous. 1-D: stride S.
- index_width_cols: 2-D [M, N]: column stride S, row stride 1 (N >= 3), like the transpose of
                    a [N, M] tensor with a gigantic leading dim. 3-D and more: the last dimension
                    strided by S, the others contiguous (in order). 1-D: stride S (as rows).
One storage spans about 2**31 elements: 4.3 GB in bf16/fp16, 8.6 GB in fp32, 17 GB for an int64
index tensor such as a target (on a GPU, where the fill costs milliseconds; ``place`` refuses a
storage that large on the CPU). A case of these layouts stretches one input only, named by its
``wide`` parameter (``upstream``: the upstream gradient), the others contiguous (``for_input``):
a float input's case holds about 17 GB (the inputs and the oracle's copy; the inputs check keeps
the storage as its fill value and the view's elements, harness.ops.checks.Snapshot), a target's
about 35 GB, one such case at a time per GPU (harness.run.gpu_slot). A target's padding is -1. INDEX_WIDTH is a module constant so that
tests can shrink it.
"""

from __future__ import annotations

import torch

from harness.ops.strategies import LAYOUTS
from vocabulary import Backend, Layout

PERMUTED_LAYOUTS = LAYOUTS + ("permuted",)
MIXED = "mixed"
MIXED_ALT = "mixed_alt"
MIXED_CYCLE = ("contiguous", "transposed", "col_sliced", "offset")

INDEX_WIDTH = 2**31  # element offsets past this need int64 arithmetic (Triton's int32 arguments stop below it)
INDEX_WIDTH_PAD = 7  # S = ceil(INDEX_WIDTH / (d - 1)) + this, made odd
INDEX_WIDTH_ROWS = "index_width_rows"
INDEX_WIDTH_COLS = "index_width_cols"
INDEX_WIDTH_LAYOUTS = (INDEX_WIDTH_ROWS, INDEX_WIDTH_COLS)
INDEX_WIDTH_MIN = 3  # elements along the strided dimension: d - 1 >= 2 keeps S below INDEX_WIDTH
WIDE = "wide"  # the case parameter that names the stretched input of an index-width case
UPSTREAM = "upstream"  # the name ``wide`` gives the upstream gradient
CPU_MAX_ELEMENTS = 1 << 26  # storages past this are refused on the CPU (the real index-width ones)
_held = False  # an index-width storage was allocated on a GPU since the last release()


def for_input(layout: str, k: int, name: str | None = None, wide: str | None = None) -> str:
    """The layout of the k-th tensor input (k = -1: the upstream gradient), named ``name``, of a
    case in ``layout``; ``wide``: the case's stretched input under an index-width layout."""
    if layout in INDEX_WIDTH_LAYOUTS:
        return layout if name is not None and name == wide else "contiguous"
    if layout not in (MIXED, MIXED_ALT):
        return layout
    if k < 0:
        return "col_sliced" if layout == MIXED_ALT else "transposed"
    return MIXED_CYCLE[k % len(MIXED_CYCLE)]


def index_width_stride(d: int) -> int:
    """The stride S of ``d`` elements along an index-width dimension: (d - 1) * S > INDEX_WIDTH > S."""
    if d < INDEX_WIDTH_MIN:
        raise ValueError(f"an index-width layout needs at least {INDEX_WIDTH_MIN} elements along its strided "
                         f"dimension, got {d}: with {d - 1} step(s) the stride would reach {INDEX_WIDTH}, "
                         "which Triton passes as int64 (no int32 overflow to find)")
    s = -(-INDEX_WIDTH // (d - 1)) + INDEX_WIDTH_PAD
    s |= 1
    if not ((d - 1) * s > INDEX_WIDTH > s):
        raise ValueError(f"{d} elements along an index-width dimension is too many for INDEX_WIDTH = {INDEX_WIDTH}")
    return s


def index_width_dim(layout: str, rank: int) -> int:
    """The dimension an index-width layout strides by S: the leading one (rows) or the last (cols)."""
    return rank - 1 if layout == INDEX_WIDTH_COLS else 0


def release() -> None:
    """Give the GPU memory of finished index-width cases back to the device (their storages span
    GBs, which the caching allocator would keep from the other workers on the GPU). Cheap when no
    index-width storage was made since the last call."""
    global _held
    if not _held:
        return
    _held = False
    from harness.run.kernel_host import give_back_memory

    give_back_memory()


def place(values: torch.Tensor, layout: str, device: str) -> torch.Tensor:
    """Return a tensor equal to ``values`` (same dtype) with the requested layout on ``device``."""
    if layout not in PERMUTED_LAYOUTS + INDEX_WIDTH_LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose from {PERMUTED_LAYOUTS + INDEX_WIDTH_LAYOUTS}")
    v = values.to(device)
    if layout == Layout.CONTIGUOUS or v.dim() == 0:
        return v.clone()
    if layout in INDEX_WIDTH_LAYOUTS:
        return _place_index_width(v, layout)
    nan = float("nan") if v.is_floating_point() else -1
    if v.dim() > 2:
        return _place_nd(v, layout, nan)
    if layout == Layout.PERMUTED:
        layout = "transposed"
    if layout == Layout.OFFSET:
        flat = torch.full((v.numel() + 5 + 3,), nan, dtype=v.dtype, device=device)
        view = flat[5 : 5 + v.numel()].view(v.shape)
    elif layout == Layout.TRANSPOSED and v.dim() == 2:
        base = torch.full((v.shape[1], v.shape[0]), nan, dtype=v.dtype, device=device)
        view = base.t()
    elif layout == Layout.TRANSPOSED:
        base = torch.full((2 * v.shape[0] + 1,), nan, dtype=v.dtype, device=device)
        view = base[::2][: v.shape[0]]
    elif v.dim() == 2:  # col_sliced
        base = torch.full((v.shape[0], v.shape[1] + 7), nan, dtype=v.dtype, device=device)
        view = base[:, 3 : 3 + v.shape[1]]
    else:
        base = torch.full((v.shape[0] + 7,), nan, dtype=v.dtype, device=device)
        view = base[3 : 3 + v.shape[0]]
    view.copy_(v)
    return view


def _place_nd(v: torch.Tensor, layout: str, nan: float) -> torch.Tensor:
    if layout == Layout.OFFSET:
        flat = torch.full((v.numel() + 5 + 3,), nan, dtype=v.dtype, device=v.device)
        view = flat[5 : 5 + v.numel()].view(v.shape)
    elif layout == Layout.TRANSPOSED:
        base = torch.full((*v.shape[:-2], v.shape[-1], v.shape[-2]), nan, dtype=v.dtype, device=v.device)
        view = base.transpose(-1, -2)
    elif layout == Layout.COL_SLICED:
        base = torch.full((*v.shape[:-1], v.shape[-1] + 7), nan, dtype=v.dtype, device=v.device)
        view = base[..., 3 : 3 + v.shape[-1]]
    else:  # permuted
        order = tuple(range(v.dim() - 1, -1, -1))
        base = torch.full(tuple(v.shape[d] for d in order), nan, dtype=v.dtype, device=v.device)
        view = base.permute(order)
    view.copy_(v)
    return view


def _place_index_width(v: torch.Tensor, layout: str) -> torch.Tensor:
    wide = index_width_dim(layout, v.dim())
    s = index_width_stride(v.shape[wide])
    strides, inner = [0] * v.dim(), 1
    for d in reversed([d for d in range(v.dim()) if d != wide]):  # the other dims contiguous, in order
        strides[d] = inner
        inner *= v.shape[d]
    if s < inner:
        raise ValueError(f"shape {tuple(v.shape)} is too large for INDEX_WIDTH = {INDEX_WIDTH}: the stride {s} "
                         f"would overlap the other dims' {inner} elements")
    strides[wide] = s
    numel = (v.shape[wide] - 1) * s + inner
    if v.device.type != "cuda" and numel > CPU_MAX_ELEMENTS:
        raise ValueError(f"layout {layout} needs a storage of {numel} elements ({numel * v.element_size() / 1e9:.1f} GB): "
                         "index-width layouts run on a GPU only (--backend cuda)")
    flat = torch.empty(numel, dtype=v.dtype, device=v.device)
    flat.fill_(float("nan") if v.is_floating_point() else -1)
    view = flat.as_strided(tuple(v.shape), tuple(strides))
    view.copy_(v)
    if v.device.type == "cuda":
        global _held
        _held = True
    return view


def is_index_width(case) -> bool:
    """Whether ``case`` (a harness.cases.case.Case) places an input in an index-width layout."""
    return case.get("layout") in INDEX_WIDTH_LAYOUTS


def check_backend(case, backend: str) -> None:
    """A UsageError for an index-width case (``--case``) on a backend other than cuda."""
    if is_index_width(case) and backend != Backend.CUDA:
        from harness.errors import UsageError

        raise UsageError(f"--case {case.id}: layout={case.get('layout')} is GPU-only (its input's storage spans "
                         f"{INDEX_WIDTH} elements); run it with --backend cuda")


def check_wide(case, shapes: dict[str, tuple[int, ...]]) -> None:
    """A UsageError unless ``case``'s ``wide`` parameter fits its layout: present exactly under
    an index-width layout, one of ``shapes`` (input name -> shape), whose strided dimension has
    at least INDEX_WIDTH_MIN elements."""
    from harness.errors import UsageError

    layout, wide = case.get("layout"), case.get(WIDE)
    if layout not in INDEX_WIDTH_LAYOUTS:
        if wide is not None:
            raise UsageError(f"--case {case.id}: {WIDE}={wide} is not allowed; {WIDE} names the stretched input "
                             f"of an index-width layout ({', '.join(INDEX_WIDTH_LAYOUTS)})")
        return
    if wide not in shapes:
        given = f"missing parameter {WIDE}" if wide is None else f"{WIDE}={wide} is not allowed"
        raise UsageError(f"--case {case.id}: {given}; layout={layout} needs {WIDE}, one of {', '.join(shapes)}")
    shape = shapes[wide]
    d = shape[index_width_dim(layout, len(shape))]
    if d < INDEX_WIDTH_MIN:
        raise UsageError(f"--case {case.id}: layout={layout} strides a dimension of {wide} that has {d} element(s); "
                         f"it needs at least {INDEX_WIDTH_MIN}")
