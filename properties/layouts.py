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
- mixed:       the tensor inputs of one call in different layouts (the k-th input of a case in
               MIXED_CYCLE[k % 4], the upstream gradient transposed), for ops with two or more
               tensor inputs: a kernel that indexes one input with another's strides (copied
               argument lists) passes every case whose inputs share a layout.
3-D and larger tensors are transposed in their last two dimensions and column-sliced in the last.
"""

from __future__ import annotations

import torch

from properties.strategies import LAYOUTS

PERMUTED_LAYOUTS = LAYOUTS + ("permuted",)
MIXED = "mixed"
MIXED_CYCLE = ("contiguous", "transposed", "col_sliced", "offset")


def for_input(layout: str, k: int) -> str:
    """The layout of the k-th tensor input (k = -1: the upstream gradient) of a case in ``layout``."""
    if layout != MIXED:
        return layout
    return "transposed" if k < 0 else MIXED_CYCLE[k % len(MIXED_CYCLE)]


def place(values: torch.Tensor, layout: str, device: str) -> torch.Tensor:
    """Return a tensor equal to ``values`` (same dtype) with the requested layout on ``device``."""
    if layout not in PERMUTED_LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; choose from {PERMUTED_LAYOUTS}")
    v = values.to(device)
    if layout == "contiguous" or v.dim() == 0:
        return v.clone()
    nan = float("nan") if v.is_floating_point() else -1
    if v.dim() > 2:
        return _place_nd(v, layout, nan)
    if layout == "permuted":
        layout = "transposed"
    if layout == "offset":
        flat = torch.full((v.numel() + 5 + 3,), nan, dtype=v.dtype, device=device)
        view = flat[5 : 5 + v.numel()].view(v.shape)
    elif layout == "transposed" and v.dim() == 2:
        base = torch.full((v.shape[1], v.shape[0]), nan, dtype=v.dtype, device=device)
        view = base.t()
    elif layout == "transposed":
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
    if layout == "offset":
        flat = torch.full((v.numel() + 5 + 3,), nan, dtype=v.dtype, device=v.device)
        view = flat[5 : 5 + v.numel()].view(v.shape)
    elif layout == "transposed":
        base = torch.full((*v.shape[:-2], v.shape[-1], v.shape[-2]), nan, dtype=v.dtype, device=v.device)
        view = base.transpose(-1, -2)
    elif layout == "col_sliced":
        base = torch.full((*v.shape[:-1], v.shape[-1] + 7), nan, dtype=v.dtype, device=v.device)
        view = base[..., 3 : 3 + v.shape[-1]]
    else:  # permuted
        order = tuple(range(v.dim() - 1, -1, -1))
        base = torch.full(tuple(v.shape[d] for d in order), nan, dtype=v.dtype, device=v.device)
        view = base.permute(order)
    view.copy_(v)
    return view
