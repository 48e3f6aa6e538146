"""Leading (batch) dims of a row-wise declared op: x[..., N] with 1 to 4 dims before the row.

``OpDecl(leading="M")`` says that M, the first dim of the inputs that have it and of the output,
counts rows that a caller may give as several leading dims (x[B, S, N]). The op's floor then ends
with CASES: x[*lead, N] for irregular lead shapes (B = 3, S = 17; B = 1; S = 1; 3 and 4 leading
dims), M their product, written ``lead=3x17`` in the case id (harness.ops.derive). Their layouts:
those of 3-D tensors (harness.ops.layouts: transposed, col_sliced, offset, permuted, mixed; mixed and
mixed_alt also with 3 and 4 leading dims) and
two of their own, for the tensors with the leading dims (the others, a weight[N], contiguous):
- seq_sliced:      x[:, :S] of a tensor with a longer sequence (S + 5): the batch stride is not
                   S times the row stride, so flattening the leading dims into one row stride is
                   wrong (a view(-1, N) raises; an as_strided over the row stride reads padding);
- lead_transposed: a seq-first tensor [S, B, ...] seen batch-first, x.transpose(0, 1): the rows
                   of one batch are S apart in memory, the batches one row apart.
The leading dims (1 to 4) stay within the interpreter's budget; 1 leading dim is the op's plain
[M, N] case, every other floor case.
"""

from __future__ import annotations

import math

import torch

from harness.errors import UsageError
from harness.ops import layouts

LEAD = "lead"  # the case parameter: the leading shape, "3x17"
SEQ_SLICED = "seq_sliced"
LEAD_TRANSPOSED = "lead_transposed"
LAYOUTS = (SEQ_SLICED, LEAD_TRANSPOSED)
MAX_LEADING = 4
SEQ_PAD = 5  # the longer sequence a seq_sliced view is cut from: S + SEQ_PAD
# (leading shape, row length, layout, dtype); mixed and mixed_alt only where the op has that layout
CASES = (
    ((3, 17), 65, "contiguous", torch.float32),
    ((3, 17), 65, SEQ_SLICED, torch.bfloat16),
    ((3, 17), 65, LEAD_TRANSPOSED, torch.float16),
    ((1, 17), 257, SEQ_SLICED, torch.float32),
    ((17, 1), 33, SEQ_SLICED, torch.float32),
    ((3, 17), 33, LEAD_TRANSPOSED, torch.float32),
    ((2, 3, 5), 17, "permuted", torch.float32),
    ((2, 3, 1, 4), 17, LEAD_TRANSPOSED, torch.bfloat16),
    ((3, 17), 1, "col_sliced", torch.float32),
    ((4, 7), 64, "transposed", torch.float16),
    ((5, 9), 31, layouts.MIXED, torch.float32),
    # 3 and 4 leading dims with the tensors of a call in different layouts: each stride of the
    # dims past the third differs between every pair of them (dy read with x's strides)
    ((2, 3, 5), 17, layouts.MIXED, torch.float16),
    ((2, 3, 5), 17, layouts.MIXED_ALT, torch.float32),
    ((2, 3, 1, 4), 17, layouts.MIXED, torch.float32),
    ((2, 3, 1, 4), 17, layouts.MIXED_ALT, torch.bfloat16),
)


def text(lead: tuple[int, ...]) -> str:
    return "x".join(str(n) for n in lead)


def parse(case, rows: int | None = None) -> tuple[int, ...] | None:
    """The case's leading shape (None: a plain [M, N] case); a UsageError for a malformed one, or
    one whose product is not ``rows`` (the case's M)."""
    value = case.get(LEAD)
    if value is None:
        return None
    parts = str(value).split("x")
    if not all(p.isdigit() and int(p) >= 1 for p in parts) or not 2 <= len(parts) <= MAX_LEADING:
        raise UsageError(f"--case {case.id}: {LEAD}={value} is not allowed; {LEAD} is 2 to {MAX_LEADING} sizes >= 1 "
                         "joined by x, such as 3x17")
    lead = tuple(int(p) for p in parts)
    if rows is not None and math.prod(lead) != rows:
        raise UsageError(f"--case {case.id}: {LEAD}={value} makes {math.prod(lead)} rows, not {rows}")
    return lead


def shape(dims: tuple[str, ...], sizes: dict[str, int], leading: str | None, lead: tuple[int, ...] | None):
    """An input's (or the output's) shape: ``leading`` given as ``lead`` where it comes first."""
    if lead is not None and dims and dims[0] == leading:
        return tuple(lead) + tuple(sizes[d] for d in dims[1:])
    return tuple(sizes[d] for d in dims)


def sizes_of(dims: tuple[str, ...], actual: tuple[int, ...], leading: str | None) -> dict[str, int]:
    """The symbolic dims read from a tensor's shape, its leading dims multiplied into ``leading``."""
    extra = len(actual) - len(dims)
    if extra > 0 and dims and dims[0] == leading:
        return {leading: math.prod(actual[: extra + 1]), **dict(zip(dims[1:], actual[extra + 1:]))}
    return dict(zip(dims, actual))


def place(values: torch.Tensor, layout: str, device: str) -> torch.Tensor:
    """harness.ops.layouts.place, plus the leading-dim layouts (tensors of 3 dims or more)."""
    if layout not in LAYOUTS:
        return layouts.place(values, layout, device)
    v = values.to(device)
    if v.dim() < 3:
        return v.clone()
    nan = float("nan") if v.is_floating_point() else -1
    if layout == SEQ_SLICED:
        base = torch.full((v.shape[0], v.shape[1] + SEQ_PAD, *v.shape[2:]), nan, dtype=v.dtype, device=v.device)
        view = base[:, : v.shape[1]]
    else:
        base = torch.full((v.shape[1], v.shape[0], *v.shape[2:]), nan, dtype=v.dtype, device=v.device)
        view = base.transpose(0, 1)
    view.copy_(v)
    return view
