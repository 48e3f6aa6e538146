"""The op's domain: the shapes a torch reference accepts.

A reference declared from a torch function or a KernelBench Model (harness.ops.reference) takes
only some shapes: a convolution's or a pool's spatial dims at least its (dilated) kernel, a
normalisation more than one element per group. ``lower_bounds`` probes the reference once per
varying dim at declaration and keeps the smallest size it accepts, so cases are drawn within
the domain; ``rejection`` runs the reference on a case's own inputs (float64 copies, made for
this case only), and a case the reference itself rejects is "outside the domain": counted and
listed in the record (check ``contract``, passed, "outside the reference's domain, not run"),
never the candidate's failure and never the end of the job.

A reference can also accept a shape it does not take: torch's CPU scaled_dot_product_attention
checks no key length against the value length and, where they differ, reads past the values'
memory (NaN, garbage, or a crash in a kernel that does the same). So the reference is run on
inputs that lie in storage padded with NaN on both sides (``padded``): where that run gives a
NaN that the same run padded with zeros does not, the reference read outside its inputs, and
the shape is outside the domain (``reads_outside``; the plain run's memory beyond an input is
whatever lies there, NaN included, so it cannot tell). Dimensions that must stay equal (key and value lengths) then vary
together, as the reference would demand if it checked.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

OUTSIDE = "outside the reference's domain, not run"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


PAD = 1 << 16  # elements of NaN on each side of a padded input, at most its own size


def padded(t, fill: float = float("nan")):
    """``t`` (a float tensor) as a contiguous view into storage holding ``fill`` on both sides of
    it; anything else as it is."""
    if not (isinstance(t, torch.Tensor) and t.is_floating_point()) or t.numel() == 0:
        return t
    pad = min(PAD, t.numel())
    buf = torch.full((t.numel() + 2 * pad,), fill, dtype=t.dtype, device=t.device)
    buf[pad:pad + t.numel()] = t.detach().reshape(-1)
    return buf[pad:pad + t.numel()].view(t.shape)


def _nans(out) -> torch.Tensor | None:
    out = out[0] if isinstance(out, (tuple, list)) and out else out
    return torch.isnan(out) if isinstance(out, torch.Tensor) and out.is_floating_point() else None


def reads_outside(reference: Callable, args, out_padded) -> bool:
    """Whether ``out_padded`` (``reference`` on ``padded`` copies of ``args``) holds a NaN that
    ``reference`` on copies padded with zeros does not: it read past its inputs' memory."""
    nan = _nans(out_padded)
    if nan is None or not bool(nan.any()):
        return False
    with torch.no_grad():
        zeros = _nans(reference(*[padded(a, 0.0) for a in args]))
    return zeros is None or zeros.shape != nan.shape or not torch.equal(zeros, nan)


OUTSIDE_MEMORY = "the reference reads past its inputs' memory at these sizes (it does not check them)"


def rejection(reference: Callable, args) -> str | None:
    """Why ``reference`` rejects ``args`` (their float64 copies), or None where it accepts them."""
    f64 = [a.detach().to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    try:
        with torch.no_grad():
            out = reference(*[padded(a) for a in f64])
        if reads_outside(reference, f64, out):
            return OUTSIDE_MEMORY
    except Exception as exc:  # noqa: BLE001 - the reference refuses this shape: the case is outside the domain
        return first_line(exc)
    return None


def lower_bounds(accepts: Callable[[str, int], bool], example: dict[str, int], varying: tuple[str, ...]) -> dict[str, int]:
    """Per varying dim, the smallest size the reference accepts with the other dims at the example's
    (``accepts(dim, size)``), found by bisection between 1 and the example's size; only dims whose
    bound is above 1 are returned."""
    out: dict[str, int] = {}
    for d in varying:
        if accepts(d, 1):
            continue
        lo, hi = 1, example[d]  # lo rejected, hi accepted (the example itself)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if accepts(d, mid):
                hi = mid
            else:
                lo = mid
        out[d] = hi
    return out


def describe(bounds: dict[str, Any]) -> str:
    return ", ".join(f"{d} >= {n}" for d, n in bounds.items())
