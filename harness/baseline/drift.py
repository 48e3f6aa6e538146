"""How far a base revision's output is from the head's: bitwise identity and ulps.

Floats are mapped to ordered integers (the bit pattern, negative values reflected below
zero; +0 and -0 both map to 0), so the distance between two values is the number of
representable values of the dtype between them. NaN at the same place on both sides counts
as identical; a NaN against a number is the distance of the NaN's bit pattern.
"""

from __future__ import annotations

import torch

_INT_VIEW = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
             torch.bfloat16: torch.int16}


def _ordered(t: torch.Tensor) -> torch.Tensor:
    bits = t.contiguous().view(_INT_VIEW[t.dtype])
    width = bits.element_size() * 8
    magnitude = (bits.to(torch.int64) & ((1 << (width - 1)) - 1)) if width < 64 else (bits & ((1 << 63) - 1))
    return torch.where(bits < 0, -magnitude, magnitude)


def output_drift(head, base) -> dict:
    """``{identical, max_ulps}`` of two outputs (max_ulps None when they cannot be compared:
    not tensors, or shapes or dtypes differ)."""
    if not isinstance(head, torch.Tensor) or not isinstance(base, torch.Tensor):
        return {"identical": head is None and base is None, "max_ulps": None}
    if head.shape != base.shape or head.dtype != base.dtype:
        return {"identical": False, "max_ulps": None}
    head, base = head.detach().cpu(), base.detach().cpu()
    if head.numel() == 0:
        return {"identical": True, "max_ulps": 0}
    if head.dtype not in _INT_VIEW:  # integers and bools: the plain difference
        diff = (head.to(torch.int64) - base.to(torch.int64)).abs()
        return {"identical": bool(torch.equal(head, base)), "max_ulps": int(diff.max())}
    both_nan = torch.isnan(head) & torch.isnan(base)
    view = _INT_VIEW[head.dtype]
    same_bits = (head.contiguous().view(view) == base.contiguous().view(view)) | both_nan
    if head.dtype == torch.float64:  # the distance of two int64 may overflow: measure it in float
        diff = (_ordered(head).double() - _ordered(base).double()).abs()
    else:
        diff = (_ordered(head) - _ordered(base)).abs()
    diff = torch.where(both_nan, torch.zeros_like(diff), diff)
    return {"identical": bool(same_bits.all()), "max_ulps": int(diff.max())}
