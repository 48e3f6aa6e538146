"""Layouts that give every tensor of one call strides and a storage offset of its own.

A kernel that reads one tensor with another's strides (``tl.load(R + row * stride_x + cols)``,
a launch that passes ``x.stride(0)`` for the residual, b read with a's row stride after a
wrapper's ``.contiguous()`` of a) is right whenever the two tensors share their strides, which
every other layout gives tensors of one shape (under ``mixed`` they differ in memory order only,
and a wrapper that copies the transposed one to contiguous makes them equal again). Here the
k-th tensor of a call (its inputs in order, index tensors too, then the upstream gradients) is
a view into a NaN-padded storage (-1 for an integer tensor) of its own:

- its storage offset is k + 1 elements: no two tensors of a call start at the same offset, and
  none at its storage's start;
- row-major (last dim unit-stride): its last dim padded by 2k + 1, so its row stride is
  N + 2k + 1, never N (what a wrapper's ``.contiguous()`` makes) and never another tensor's;
- column-major: the transpose of such a view in its last two dims (row stride 1, column stride
  M + 2k + 1); a 1-D tensor strided by 2k + 2.

Which tensors are column-major depends on the layout and on the tensor's member index j among
the tensors of its shape that come before it in the call:
- apart:          every tensor row-major (a kernel whose contract takes unit-stride rows only
                  still meets tensors of one shape with different row strides);
- apart_orders:   the tensors whose j has bit 0 set column-major;
- apart_orders2, apart_orders3, ...: bit 1, bit 2, ... of j.
Two tensors of one shape differ in some bit of j, so with ceil(log2(g)) order layouts for the
largest group of g tensors of one shape, every pair of them meets different memory orders in
some case, and different row strides and storage offsets in every case.
"""

from __future__ import annotations

import math

import torch

APART = "apart"
ORDERS = "apart_orders"


def layouts_for(group: int) -> tuple[str, ...]:
    """The apart layouts of an op whose largest group of same-shaped tensors (upstream gradients
    counted) has ``group`` members: none below two, else ``apart`` and one order layout per bit
    of the largest member index."""
    if group < 2:
        return ()
    bits = (group - 1).bit_length()
    return (APART,) + tuple(ORDERS if b == 0 else f"{ORDERS}{b + 1}" for b in range(bits))


def is_apart(layout: str) -> bool:
    return layout == APART or (layout.startswith(ORDERS) and (layout == ORDERS or layout[len(ORDERS):].isdigit()))


def column_major(layout: str, member: int) -> bool:
    """Whether the ``member``-th tensor of its shape is column-major under ``layout``."""
    if layout == APART:
        return False
    bit = 0 if layout == ORDERS else int(layout[len(ORDERS):]) - 1
    return bool(member >> bit & 1)


class Members:
    """Numbers the tensors of one call as they are placed: each one's index k in the call and
    its member index j among the earlier tensors of the same shape."""

    def __init__(self) -> None:
        self.count = 0
        self.seen: dict[tuple[int, ...], int] = {}

    def next(self, shape: tuple[int, ...]) -> tuple[int, int]:
        k, j = self.count, self.seen.get(tuple(shape), 0)
        self.count += 1
        self.seen[tuple(shape)] = j + 1
        return k, j


def place(values: torch.Tensor, layout: str, k: int, member: int, device: str) -> torch.Tensor:
    """``values`` (same dtype) as the k-th tensor of a call, the ``member``-th of its shape, under
    the apart ``layout`` (module docstring)."""
    v = values.to(device)
    if v.dim() == 0:
        return v.clone()
    pad, offset = 2 * k + 1, k + 1
    transposed = column_major(layout, member)
    fill = float("nan") if v.is_floating_point() else -1
    if v.dim() == 1:
        step = pad + 1 if transposed else 1
        flat = torch.full((offset + v.shape[0] * step + pad,), fill, dtype=v.dtype, device=device)
        view = flat[offset:offset + v.shape[0] * step:step]
    else:
        lead, rows, cols = tuple(v.shape[:-2]), v.shape[-2], v.shape[-1]
        base = (*lead, cols, rows + pad) if transposed else (*lead, rows, cols + pad)
        flat = torch.full((offset + math.prod(base),), fill, dtype=v.dtype, device=device)
        padded = flat[offset:].view(base)
        view = padded[..., :rows].transpose(-1, -2) if transposed else padded[..., :cols]
    view.copy_(v)
    return view
