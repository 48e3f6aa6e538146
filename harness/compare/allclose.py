"""Compare an actual tensor with the expected one: check its attributes, measure, describe,
return a record.

:func:`compare` never raises; reports and tests read the :class:`Comparison` it returns. Shape is
checked before values; harness.compare.measure computes the statistics (the allowed error per
element, non-finite values, the worst element, its roundings of the terms) and
harness.compare.message puts them in words, as torch.testing keeps measuring and describing apart.
"""

from __future__ import annotations

import dataclasses

import torch

from harness.compare import message
from harness.compare.measure import measure, measure_exact


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


def compare(
    actual: torch.Tensor,
    expected: torch.Tensor,
    *,
    atol: float,
    rtol: float,
    magnitude: torch.Tensor | None = None,
    terms_rtol: float = 0.0,
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
                        in_dtype=in_dtype or expected.dtype, nan_ok=nan_ok, limit=limit)
    except Exception as exc:  # a record, never an exception: a broken output is a failed check
        return Comparison(False, atol, rtol, message=message.comparison_failed(exc))


def _compare(actual, expected, *, atol: float, rtol: float, magnitude, terms_rtol: float,
             in_dtype: torch.dtype, nan_ok=None, limit=None) -> Comparison:
    if not isinstance(actual, torch.Tensor):
        return Comparison(False, atol, rtol, message=message.not_a_tensor(actual))
    if tuple(actual.shape) != tuple(expected.shape):
        return Comparison(False, atol, rtol, message=message.shape_mismatch(actual, expected))
    if expected.numel() == 0:
        return Comparison(True, atol, rtol, 0.0, 0.0, 0.0, 0, 0, None, 0, message.EMPTY)
    if not (expected.is_floating_point() or expected.is_complex()):
        m = measure_exact(actual, expected)
        return Comparison(m.passed, atol, rtol, m.max_abs_err, m.max_rel_err, m.err_ratio, m.mismatched, m.numel,
                          None if m.passed else m.worst_index, 0, message.describe_exact(m, expected.dtype))
    m = measure(actual, expected, atol=atol, rtol=rtol, magnitude=magnitude, terms_rtol=terms_rtol,
                in_dtype=in_dtype, nan_ok=nan_ok, limit=limit)
    text = message.describe(m, atol=atol, rtol=rtol, terms_rtol=terms_rtol, with_magnitude=magnitude is not None,
                            in_dtype=in_dtype)
    return Comparison(m.passed, atol, rtol, m.max_abs_err, m.max_rel_err, m.err_ratio, m.mismatched, m.numel,
                      m.worst_index, m.nonfinite_mismatched, text, m.rounding_units)


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
