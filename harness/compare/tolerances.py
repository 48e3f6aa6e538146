"""A value check's allowed error, and what a kernel's ``Contract(precision=...)`` adds to it.

A value passes when ``|actual - expected| <= atol + rtol * |expected| + terms_rtol * magnitude``
(harness.compare.measure), ``expected`` being the float64 oracle rounded to the output's dtype.
There is one error model, the ops' (harness.compare.rounding, derived per op by
harness.ops.derive.tolerance): ``magnitude`` is the oracle's rounding allowance of each element,
added as is (``terms_rtol`` 1), atol and rtol the output dtype's flush-to-zero floor and one ulp.
"""

from __future__ import annotations

import dataclasses

import torch

from harness.compare.rounding import UNIT_ROUNDOFF
from vocabulary.records import PRECISION_UNITS


@dataclasses.dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    why: str = ""
    # the weight of the oracle's per-element allowance (harness.compare.allclose): 1, the
    # allowance as is; 0 for an output compared exactly
    terms_rtol: float = 1.0


# Contract(precision="input"): a kernel that rounds its intermediates (logits, a normalised row) to
# the fp16/bf16 input dtype by design is allowed this many roundings of that dtype on the terms a
# formula sums or cancels: the bound up to which a failure message already calls an error "a
# precision choice at most" (harness.compare.message, PRECISION_UNITS), so a declared convention reproduced
# faithfully passes and a precision loss beyond it still fails.
DECLARED_ULPS = PRECISION_UNITS
LOW_PRECISION = (torch.float16, torch.bfloat16)
# Contract(precision=(DTYPE, N)): N roundings of DTYPE on the terms, on every case: a kernel whose
# DTYPE arithmetic loses more than the op's model by design, e.g. ("float32", 64) for an fp32
# softmax computed as exp(x - logsumexp(x)), whose exp inherits a rounding of |x| rather than of
# |x - max|. "input": 8 roundings of the input dtype where that is fp16 or bf16 (intermediates
# rounded to the input dtype). ("tfloat32", N): N roundings of TF32 (a 10-bit mantissa, unit
# roundoff 2^-11: what a GPU's tl.dot computes fp32 products in by default) on the terms of fp32
# cases only, counted as 2^13 fp32 roundings each.
PRECISION_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                    "tfloat32": torch.float32}
FORMAT_UNIT_ROUNDOFF = {"tfloat32": 2.0**-11}  # formats without a torch dtype of their own
MAX_DECLARED_ROUNDINGS = 4096.0  # beyond that a declaration waives the check rather than bounds it


def for_check(precision, check: str):
    """The precision a ``Contract(precision=...)`` declares for one value check: a per-check dict's
    entry for it ("float32", the op's model, when it names another check), else the one for all."""
    if isinstance(precision, dict):
        return precision.get(check, "float32")
    return precision


def declared_roundings(precision, in_dtype: torch.dtype) -> tuple[float, torch.dtype]:
    """How many roundings, and of which dtype, a kernel's ``Contract(precision=...)`` adds on cases
    of input dtype ``in_dtype`` ((0, in_dtype): none, the op's error model alone)."""
    if precision == "float32" or precision is None:
        return 0.0, in_dtype
    if precision == "input":
        return (DECLARED_ULPS if in_dtype in LOW_PRECISION else 0.0), in_dtype
    name, count = precision
    if name in FORMAT_UNIT_ROUNDOFF:  # a format without a dtype: counted in roundings of the one it narrows
        if in_dtype != PRECISION_DTYPES[name]:
            return 0.0, in_dtype
        return float(count) * FORMAT_UNIT_ROUNDOFF[name] / UNIT_ROUNDOFF[in_dtype], in_dtype
    return float(count), PRECISION_DTYPES[name]


def declaration(precision, roundings: float, dtype: torch.dtype) -> str:
    """What a ``Contract(precision=...)`` adds, as recorded on each value check it widens."""
    return f"Contract(precision={precision!r}): + {roundings:g} {str(dtype).removeprefix('torch.')} roundings of the terms"


def declared_precision(tol: Tolerance, magnitude: torch.Tensor | None, terms: torch.Tensor | None,
                       expected: torch.Tensor, in_dtype: torch.dtype, roundings: float | None = None,
                       precision="input", dtype: torch.dtype | None = None) -> tuple[Tolerance, torch.Tensor | None]:
    """The tolerance and allowance of one value check of a kernel whose ``Contract(precision=...)``
    adds ``roundings`` roundings of ``dtype`` (default: the input dtype) on the terms (``terms``,
    else |expected|) to what the op's error model allows (``magnitude``, its allowance);
    ``tol.why`` says so, and with it every record the declaration widens. ``roundings`` None: what
    ``precision`` declares."""
    if roundings is None:
        roundings, dtype = declared_roundings(precision, in_dtype)
    dtype = dtype or in_dtype
    if roundings <= 0:
        return tol, magnitude
    extra = roundings * UNIT_ROUNDOFF[dtype]
    why = f"{tol.why}; {declaration(precision, roundings, dtype)}"
    size = (terms if terms is not None else expected).detach().to(torch.float64).abs()
    size = torch.where(torch.isfinite(size), size, torch.zeros_like(size))
    allowance = extra * size if magnitude is None else magnitude.to(torch.float64) + extra * size.to(magnitude.device)
    return dataclasses.replace(tol, rtol=max(tol.rtol, extra), why=why), allowance
