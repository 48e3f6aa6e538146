"""Describe a comparison in words: the message of a :class:`harness.compare.measure.Measurement`
and of a comparison that stopped before its values (not a tensor, another shape, an error).

A failure reads like torch.testing's: the count of mismatched elements, the worst element with
its allowed error, the greatest absolute and relative differences; and how many roundings of
its terms the worst element is off: a few is a precision choice (an fp16 intermediate, another
summation order), hundreds or more a logic error.
"""

from __future__ import annotations

import math

import torch

from harness.compare.measure import Measurement
from vocabulary.records import PRECISION_UNITS

EMPTY = "empty tensors"


def not_a_tensor(actual) -> str:
    return f"expected a tensor, got {type(actual).__name__}"


def shape_mismatch(actual: torch.Tensor, expected: torch.Tensor) -> str:
    return f"shape mismatch: got {tuple(actual.shape)}, expected {tuple(expected.shape)}"


def comparison_failed(exc: Exception) -> str:
    return f"comparison failed: {type(exc).__name__}: {exc}"


def describe(m: Measurement, *, atol: float, rtol: float, terms_rtol: float, with_magnitude: bool,
             in_dtype: torch.dtype) -> str:
    """One line for a pass; for a failure, torch.testing's lines and the rounding units."""
    if m.passed:
        return f"max abs {_fmt(m.max_abs_err)}, max rel {_fmt(m.max_rel_err)}, {_fmt(m.err_ratio)} of the allowed error"
    lines = [f"Mismatched elements: {m.mismatched} / {m.numel} ({100.0 * m.mismatched / m.numel:.1f}%)"]
    if m.rounding_units is not None:
        lines.append(_units_line(m.rounding_units, in_dtype))
    if m.nonfinite_mismatched:
        lines.append(f"Non-finite mismatches: {m.nonfinite_mismatched} (NaN/Inf where the oracle has none, or the reverse)")
    lines.append(
        f"Worst element at index {tuple(m.worst_index)}: got {m.worst_actual:.6g}, expected {m.worst_expected:.6g} "
        f"(allowed {m.worst_allowed:.3g} = {atol:g} + {rtol:g} * |expected|"
        f"{f' + {terms_rtol:g} * rounding allowance' if with_magnitude else ''})"
    )
    lines.append(f"Greatest absolute difference: {_fmt(m.max_abs_err)} (up to {atol:g} allowed)")
    lines.append(f"Greatest relative difference: {_fmt(m.max_rel_err)} (up to {rtol:g} allowed)")
    return "\n".join(lines)


def describe_exact(m: Measurement, dtype: torch.dtype) -> str:
    """The words of an exact comparison (harness.compare.measure.measure_exact)."""
    what = f"{str(dtype).removeprefix('torch.')} output compared exactly"
    if m.passed:
        return f"{what}: every element equal"
    return (f"Mismatched elements: {m.mismatched} / {m.numel} ({100.0 * m.mismatched / m.numel:.1f}%): {what}, any "
            f"difference fails\nFirst at index {tuple(m.worst_index)}: got {m.worst_actual}, expected {m.worst_expected}")


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def _units_line(units: float, dtype: torch.dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    what = (f"the allowed rounding of the terms (the reference's spread when its inputs are rounded to {name}, "
            "plus fp32 roundings of the terms and one ulp of the output)")
    if not math.isfinite(units):
        return f"Error = {units} x {what}: the terms are 0 there, so any error is a logic error"
    precision = units <= PRECISION_UNITS
    verdict = "a precision choice at most" if precision else "more than rounding explains: a logic error or a precision bug"
    if precision and dtype in (torch.float16, torch.bfloat16):
        verdict += (f" (a kernel that rounds its intermediates to {name} by design declares it: "
                    "Contract(precision='input'))")
    elif precision and dtype == torch.float32:
        verdict += (" (a kernel whose fp32 formula loses more by design, e.g. exp(x - logsumexp(x)), declares "
                    "its bound: Contract(precision=('float32', roundings)))")
    return f"Error = {units:.3g} x {what}: {verdict}"
