"""Compare an actual tensor with the expected one: compute, describe, return a record.

:func:`compare` never raises; reports and tests read the :class:`Comparison` it returns.
Shape is checked before values; non-finite values must sit exactly where the expected
tensor has them (NaN where NaN, +inf where +inf, -inf where -inf), except that an inf of the
right sign passes where the allowed error reaches past the dtype's largest finite value, and a
finite value of the right sign passes for an expected inf (a reference that overflowed the
output dtype) where the allowed error reaches down to it from that largest value.

Allowed error per element: ``atol + rtol * |expected| + terms_rtol * magnitude``; an integer or
bool ``expected`` (argmax's indices) allows none: any element that differs fails.
``magnitude`` is optional and comes from the oracle: the size of the terms a formula
subtracts or sums (for RMSNorm's dx, |r*u| + |x*r^3*mean(u*x)|). Where those terms cancel,
no fp32 kernel can be closer to the result than a few fp32 ulps *of the terms*, so
``terms_rtol`` (fp32-sized, see harness.compare.tolerances) is applied to them on top of the output
dtype's own rounding allowance; without a magnitude the rule is torch.allclose's.
With ``model="rounding"`` (declared ops) the magnitude is instead the rounding allowance of
harness.compare.rounding: the float64 reference's spread when its inputs are rounded to the
input dtype, plus fp32 roundings of the terms.

A failure also says how far the worst element is in units of the dtype's rounding of the terms
involved (``rounding_units``): with ``model="rounding"`` that is |err| / allowed; otherwise
|err| / (u * terms), u the dtype's unit roundoff and terms the magnitude (or |expected|). A few
units is a precision choice (an fp16 intermediate, another summation order); hundreds or more
is a logic error.
"""

from __future__ import annotations

import dataclasses
import math

import torch

from harness.compare.rounding import UNIT_ROUNDOFF


@dataclasses.dataclass
class Comparison:
    passed: bool
    atol: float
    rtol: float
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    err_ratio: float | None = None  # worst |err| / allowed; <= 1 passes
    mismatched: int = 0
    numel: int = 0
    worst_index: list[int] | None = None
    nonfinite_mismatched: int = 0
    message: str = ""
    rounding_units: float | None = None  # worst error in units of the dtype's rounding of the terms
    declared: str | None = None  # a kernel's Contract(precision=...) that widened this comparison, and by how much


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def compare(
    actual: torch.Tensor,
    expected: torch.Tensor,
    *,
    atol: float,
    rtol: float,
    magnitude: torch.Tensor | None = None,
    terms_rtol: float = 0.0,
    model: str = "table",
    in_dtype: torch.dtype | None = None,
    nan_ok: torch.Tensor | None = None,
    limit: torch.Tensor | None = None,
) -> Comparison:
    """allclose with diagnostics. ``expected`` should already be rounded to the output dtype;
    ``in_dtype`` (default: expected's) is the dtype whose rounding the failure message counts in;
    ``nan_ok`` (bool, expected's shape): elements where a NaN is accepted besides the expected
    value (an ignored row's exact gradient is 0, torch's formula gives 0 * NaN there);
    ``limit`` (expected's shape, NaN where unused, rounded like ``expected``): where the oracle is
    NaN because an input is infinite, the mathematical limit, accepted besides NaN
    (harness.compare.nonfinite)."""
    try:
        return _compare(actual, expected, atol=atol, rtol=rtol, magnitude=magnitude, terms_rtol=terms_rtol,
                        model=model, in_dtype=in_dtype or expected.dtype, nan_ok=nan_ok, limit=limit)
    except Exception as exc:  # a record, never an exception: a broken output is a failed check
        return Comparison(False, atol, rtol, message=f"comparison failed: {type(exc).__name__}: {exc}")


def _compare(actual, expected, *, atol: float, rtol: float, magnitude, terms_rtol: float, model: str,
             in_dtype: torch.dtype, nan_ok=None, limit=None) -> Comparison:
    if not isinstance(actual, torch.Tensor):
        return Comparison(False, atol, rtol, message=f"expected a tensor, got {type(actual).__name__}")
    if tuple(actual.shape) != tuple(expected.shape):
        return Comparison(
            False, atol, rtol, message=f"shape mismatch: got {tuple(actual.shape)}, expected {tuple(expected.shape)}"
        )
    if not (expected.is_floating_point() or expected.is_complex()):
        return _exact(actual, expected, atol, rtol)
    # on the oracle's device: a GPU compares large outputs in float64 far faster than a host copy
    # (elementwise IEEE arithmetic, max and counts give the same numbers on either)
    e = expected.detach().to(torch.float64)
    a = actual.detach().to(e.device, torch.float64)
    if limit is not None:  # NaN in the oracle from an infinite input: NaN, or the limit (nonfinite.py)
        lim = limit.detach().to(e.device, torch.float64).expand_as(e)
        e = torch.where(torch.isnan(e) & ~torch.isnan(lim) & ~torch.isnan(a), lim, e)
    numel = e.numel()
    if numel == 0:
        return Comparison(True, atol, rtol, 0.0, 0.0, 0.0, 0, 0, None, 0, "empty tensors")

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
    nonfinite_mismatched = int(nonfinite_bad.sum().item())
    max_abs = float(diff.max().item())
    max_rel = float(rel.max().item())
    err_ratio = float(ratio.max().item())
    passed = mismatched == 0
    units = None if passed else _rounding_units(flat, diff, e, magnitude, err_ratio, model, in_dtype)

    if passed:
        message = f"max abs {_fmt(max_abs)}, max rel {_fmt(max_rel)}, {_fmt(err_ratio)} of the allowed error"
    else:
        at = tuple(worst)
        lines = [f"Mismatched elements: {mismatched} / {numel} ({100.0 * mismatched / numel:.1f}%)"]
        if units is not None:
            lines.append(_units_line(units, model, in_dtype))
        if nonfinite_mismatched:
            lines.append(f"Non-finite mismatches: {nonfinite_mismatched} (NaN/Inf where the oracle has none, or the reverse)")
        lines.append(
            f"Worst element at index {at}: got {a.reshape(-1)[flat].item():.6g}, expected {e.reshape(-1)[flat].item():.6g} "
            f"(allowed {allowed.reshape(-1)[flat].item():.3g} = {atol:g} + {rtol:g} * |expected|"
            f"{f' + {terms_rtol:g} * {_terms_label(model)}' if magnitude is not None else ''})"
        )
        lines.append(f"Greatest absolute difference: {_fmt(max_abs)} (up to {atol:g} allowed)")
        lines.append(f"Greatest relative difference: {_fmt(max_rel)} (up to {rtol:g} allowed)")
        message = "\n".join(lines)
    return Comparison(
        passed, atol, rtol, max_abs, max_rel, err_ratio, mismatched, numel, worst, nonfinite_mismatched, message, units
    )


def _exact(actual, expected, atol: float, rtol: float) -> Comparison:
    """An integer or bool output (argmax's indices, a mask) against the oracle's: equal or wrong,
    with no allowance (an index one off is another element, not a rounding)."""
    e = expected.detach()
    a = actual.detach().to(e.device)
    bad = a != e  # an integer kernel output compares exactly; a float one (NaN included) as its value
    numel, mismatched = e.numel(), int(bad.sum().item())
    what = f"{str(e.dtype).removeprefix('torch.')} output compared exactly"
    if numel == 0 or not mismatched:
        return Comparison(True, atol, rtol, 0.0, 0.0, 0.0, 0, numel, None, 0, f"{what}: every element equal")
    flat = int(torch.argmax(bad.reshape(-1).to(torch.uint8)).item())
    worst = [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(e.shape))] if e.dim() else []
    diff = (a.to(torch.float64) - e.to(torch.float64)).abs()
    message = (f"Mismatched elements: {mismatched} / {numel} ({100.0 * mismatched / numel:.1f}%): {what}, any "
               f"difference fails\nFirst at index {tuple(worst)}: got {a.reshape(-1)[flat].item()}, expected "
               f"{e.reshape(-1)[flat].item()}")
    return Comparison(False, atol, rtol, float(diff.max().item()), math.inf, math.inf, mismatched, numel, worst, 0,
                      message)


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


def _terms_label(model: str) -> str:
    return "rounding allowance" if model == "rounding" else "term magnitude"


def _rounding_units(flat: int, diff, e, magnitude, err_ratio: float, model: str, dtype: torch.dtype) -> float | None:
    """The worst element's error in units of the dtype's rounding of its terms (None: non-finite)."""
    if not math.isfinite(err_ratio):
        return None
    if model == "rounding":
        return err_ratio
    u = UNIT_ROUNDOFF.get(dtype, 2.0**-24)
    terms = e.abs().reshape(-1)[flat]
    if magnitude is not None:
        terms = torch.maximum(terms, magnitude.detach().to(e.device, torch.float64).expand_as(e).reshape(-1)[flat])
    scale = u * float(terms)
    err = float(diff.reshape(-1)[flat])
    return err / scale if scale > 0 else math.inf


def _units_line(units: float, model: str, dtype: torch.dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    if model == "rounding":
        what = (f"the allowed rounding of the terms (the reference's spread when its inputs are rounded to {name}, "
                "plus fp32 roundings of the terms and one ulp of the output)")
    else:
        what = f"the {name} rounding of the terms (unit roundoff x the term magnitude, or x |expected|)"
    if not math.isfinite(units):
        return f"Error = {units} x {what}: the terms are 0 there, so any error is a logic error"
    verdict = "a precision choice at most" if units <= 8 else "more than rounding explains: a logic error or a precision bug"
    if units <= 8 and dtype in (torch.float16, torch.bfloat16):
        verdict += (f" (a kernel that rounds its intermediates to {name} by design declares it: "
                    "Contract(precision='input'))")
    elif units <= 8 and dtype == torch.float32:
        verdict += (" (a kernel whose fp32 formula loses more by design, e.g. exp(x - logsumexp(x)), declares "
                    "its bound: Contract(precision=('float32', roundings)))")
    return f"Error = {units:.3g} x {what}: {verdict}"


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> tuple[bool, int]:
    """Whether two tensors hold the same bits (NaNs included); returns (equal, differing elements)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False, max(a.numel(), b.numel())
    if a.numel() == 0:
        return True, 0
    # reshape(-1) first: a 0-dim tensor (a scalar loss) cannot be viewed as bytes directly
    ai = a.detach().contiguous().reshape(-1).view(torch.uint8).reshape(a.numel(), -1)
    bi = b.detach().contiguous().reshape(-1).view(torch.uint8).reshape(b.numel(), -1)
    differing = int((ai != bi).any(dim=1).sum().item())
    return differing == 0, differing
