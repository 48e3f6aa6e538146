"""Measure how far an actual tensor is from the expected one: the statistics of a comparison,
no words (harness.compare.message describes them, harness.compare.allclose joins the two).

Allowed error per element: ``atol + rtol * |expected| + terms_rtol * magnitude``; an integer or
bool ``expected`` (argmax's indices) allows none: any element that differs fails (``measure_exact``).
``magnitude`` comes from the oracle: the rounding allowance of harness.compare.rounding (the
float64 reference's spread when its inputs are rounded to the input dtype, plus fp32 roundings of
the terms a formula sums or cancels), added as is (``terms_rtol`` 1); without it the rule is
torch.allclose's.

Non-finite values must sit exactly where the expected tensor has them (NaN where NaN, +inf where
+inf, -inf where -inf), except that an inf of the right sign passes where the allowed error
reaches past the dtype's largest finite value, and a finite value of the right sign passes for an
expected inf (a reference that overflowed the output dtype) where the allowed error reaches down
to it from that largest value.

A failure also says how far the worst element is in units of the allowed rounding of its terms
(``rounding_units``): |err| / allowed, None where it is not finite.
"""

from __future__ import annotations

import dataclasses
import math

import torch



@dataclasses.dataclass(frozen=True)
class Measurement:
    """The statistics of one comparison of two same-shaped, non-empty tensors."""

    numel: int
    mismatched: int
    nonfinite_mismatched: int
    max_abs_err: float
    max_rel_err: float
    err_ratio: float  # worst |err| / allowed; <= 1 passes
    worst_index: list[int]  # of the worst element (largest |err| / allowed)
    worst_actual: float  # the worst element's values, as compared
    worst_expected: float
    worst_allowed: float
    rounding_units: float | None  # a failure's worst error in roundings of the terms (None: passed or non-finite)

    @property
    def passed(self) -> bool:
        return self.mismatched == 0


def measure(actual: torch.Tensor, expected: torch.Tensor, *, atol: float, rtol: float, magnitude, terms_rtol: float,
            in_dtype: torch.dtype, nan_ok=None, limit=None) -> Measurement:
    """The statistics of ``actual`` against ``expected`` (same shape, at least one element);
    the arguments are harness.compare.allclose.compare's."""
    # on the oracle's device: a GPU compares large outputs in float64 far faster than a host copy
    # (elementwise IEEE arithmetic, max and counts give the same numbers on either)
    e = expected.detach().to(torch.float64)
    a = actual.detach().to(e.device, torch.float64)
    if limit is not None:  # NaN in the oracle from an infinite input: NaN, or the limit (nonfinite.py)
        lim = limit.detach().to(e.device, torch.float64).expand_as(e)
        e = torch.where(torch.isnan(e) & ~torch.isnan(lim) & ~torch.isnan(a), lim, e)

    e_finite = torch.isfinite(e)
    a_finite = torch.isfinite(a)
    same_nonfinite = (torch.isnan(a) & torch.isnan(e)) | (~e_finite & ~torch.isnan(e) & (a == e))
    if nan_ok is not None:
        accepted_nan = nan_ok.to(e.device, torch.bool).expand_as(e) & torch.isnan(a)
        same_nonfinite = same_nonfinite | accepted_nan
        a_finite = a_finite | accepted_nan  # compared as the alternative it is, never as a value
        a = torch.where(accepted_nan, e, a)
    nonfinite_bad = (~e_finite & ~same_nonfinite) | (e_finite & ~a_finite)

    both = e_finite & a_finite
    diff = torch.where(both, (a - e).abs(), torch.zeros_like(a))
    allowed = atol + rtol * e.abs().where(e_finite, torch.zeros_like(e))
    if magnitude is not None:
        m = magnitude.detach().to(e.device, torch.float64).expand_as(e)
        allowed = allowed + terms_rtol * m.where(torch.isfinite(m), torch.zeros_like(m))
    nonfinite_bad = nonfinite_bad & ~_may_overflow(actual.dtype, a, e, e_finite, allowed)
    nonfinite_bad = nonfinite_bad & ~_overflowed_reference(actual.dtype, a, e, allowed)
    bad = nonfinite_bad | (both & (diff > allowed))
    ratio = torch.where(both, diff / allowed, torch.zeros_like(diff))
    ratio = torch.where(nonfinite_bad, torch.full_like(ratio, math.inf), ratio)

    rel = torch.where(both & (e != 0), diff / e.abs(), torch.zeros_like(diff))
    rel = torch.where(both & (e == 0) & (diff > 0), torch.full_like(rel, math.inf), rel)

    flat = int(torch.argmax(ratio).item())
    worst = [int(i) for i in torch.unravel_index(torch.tensor(flat, device="cpu"), tuple(e.shape))] if e.dim() else []
    mismatched = int(bad.sum().item())
    err_ratio = float(ratio.max().item())
    units = err_ratio if mismatched and math.isfinite(err_ratio) else None
    return Measurement(
        numel=e.numel(), mismatched=mismatched, nonfinite_mismatched=int(nonfinite_bad.sum().item()),
        max_abs_err=float(diff.max().item()), max_rel_err=float(rel.max().item()), err_ratio=err_ratio,
        worst_index=worst, worst_actual=a.reshape(-1)[flat].item(), worst_expected=e.reshape(-1)[flat].item(),
        worst_allowed=allowed.reshape(-1)[flat].item(), rounding_units=units,
    )


def _overflowed_reference(dtype: torch.dtype, a, e, allowed) -> torch.Tensor:
    """The converse of _may_overflow: where the reference rounded to +-inf in the output dtype (its
    exact value lies at or past the dtype's largest finite value, on the side of its sign) but its
    allowed error (the spread of an ill-conditioned result: a constant row against a tiny eps)
    reaches from there down to a finite result, that result is within it, whatever its sign: an
    allowance wider than the value spans zero. An allowance of less than the spacing at the
    dtype's largest value never qualifies: a kernel that saturates a true infinity to the largest
    finite value fails."""
    if not dtype.is_floating_point or dtype == torch.float64:
        return torch.zeros_like(e, dtype=torch.bool)
    big = float(torch.finfo(dtype).max)
    top_ulp = big * float(torch.finfo(dtype).eps) / 2.0
    finite = torch.isfinite(a)
    toward = torch.sign(e) * a.where(finite, torch.zeros_like(a))  # a's signed distance from 0 towards e
    return torch.isinf(e) & finite & (allowed > top_ulp) & (toward + allowed >= big)


def _may_overflow(dtype: torch.dtype, a, e, e_finite, allowed) -> torch.Tensor:
    """Where the allowed error reaches past the dtype's largest finite value, a result that
    rounded to +-inf (same sign as expected) is within it: rounding may overflow there."""
    if not dtype.is_floating_point or dtype == torch.float64:
        return torch.zeros_like(e_finite)
    big = float(torch.finfo(dtype).max)
    return e_finite & torch.isinf(a) & (torch.sign(a) == torch.sign(e)) & (e.abs() + allowed >= big)


def measure_exact(actual: torch.Tensor, expected: torch.Tensor) -> Measurement:
    """An integer or bool output (argmax's indices, a mask) against the oracle's: equal or wrong,
    with no allowance (an index one off is another element, not a rounding); the first differing
    element is the worst."""
    e = expected.detach()
    a = actual.detach().to(e.device)
    bad = (a != e).reshape(-1)  # an integer kernel output compares exactly; a float one (NaN included) as its value
    numel, mismatched = e.numel(), int(bad.sum().item())
    if not mismatched:
        return Measurement(numel, 0, 0, 0.0, 0.0, 0.0, [], 0.0, 0.0, 0.0, None)
    flat = int(torch.argmax(bad.to(torch.uint8)).item())
    worst = [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(e.shape))] if e.dim() else []
    diff = (a.to(torch.float64) - e.to(torch.float64)).abs()
    return Measurement(numel, mismatched, 0, float(diff.max().item()), math.inf, math.inf, worst,
                       a.reshape(-1)[flat].item(), e.reshape(-1)[flat].item(), 0.0, None)
