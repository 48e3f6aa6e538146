"""The op's domain: the shapes a torch reference accepts.

A reference declared from a torch function or a KernelBench Model (properties.reference) takes
only some shapes: a convolution's or a pool's spatial dims at least its (dilated) kernel, a
normalisation more than one element per group. ``lower_bounds`` probes the reference once per
varying dim at declaration and keeps the smallest size it accepts, so cases are drawn within
the domain; ``rejection`` runs the reference on a case's own inputs (float64 copies, made for
this case only), and a case the reference itself rejects is "outside the domain": counted and
listed in the record (check ``contract``, passed, "outside the reference's domain, not run"),
never the candidate's failure and never the end of the job.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

OUTSIDE = "outside the reference's domain, not run"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def rejection(reference: Callable, args) -> str | None:
    """Why ``reference`` rejects ``args`` (their float64 copies), or None where it accepts them."""
    f64 = [a.detach().to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    try:
        with torch.no_grad():
            reference(*f64)
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
