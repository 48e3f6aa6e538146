"""The one table of allowed errors, per dtype of the compared output.

A value passes when ``|actual - expected| <= atol + rtol * |expected|`` (torch.allclose's
rule), ``expected`` being the float64 oracle rounded to the output's dtype.

Reasoning per row:
- float32: the tutorial's figures. An fp32 row reduction of length N typically loses
  about sqrt(N) * 6e-8 relative (5e-6 at N=8192), far inside rtol 1e-4.
- float16: the tutorial's atol = rtol = 3e-3, about three fp16 ulps at 1.0 (ulp = 2^-10):
  half an ulp from the oracle's rounding, half from the kernel's, the rest fp32 arithmetic.
- bfloat16: one bf16 ulp at 1.0 is 2^-7 = 7.8e-3. The Triton interpreter truncates
  fp32 -> bf16 instead of rounding (up to one whole ulp), and the oracle's own rounding
  adds half an ulp, so two ulps, 1.6e-2, is the smallest bound that covers both.
- float64: outputs computed in double (only the oracles' own self-tests use it).
- terms_rtol (every row but float64: 1e-5, about 80 fp32 ulps): where a formula cancels or
  sums terms much larger than its result, an fp32 evaluation is off by a few ulps *of the
  terms*; typical accumulated rounding over the lengths the cases use (sqrt(n) * 6e-8 for
  n up to 8192) stays well inside it, while one lost contribution in a sum of a few
  hundred terms (a race, a skipped chunk) does not.
An override must give both atol and rtol and say why (see OpSpec.tolerance).
"""

from __future__ import annotations

import dataclasses
import enum

import torch

from harness.compare.rounding import UNIT_ROUNDOFF
from vocabulary.records import PRECISION_UNITS


class ErrorModel(enum.StrEnum):
    """What a comparison's per-element magnitude means (harness.compare.allclose)."""

    TABLE = "table"  # atol/rtol from TABLE; the magnitude is the size of the terms a formula sums or cancels
    # the magnitude is the spread of the reference under the input dtype's rounding
    # (harness.compare.rounding), allowed as is, so |err| / allowed reads in units of that rounding
    ROUNDING = "rounding"


@dataclasses.dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    why: str = ""
    # relative error allowed against the oracle's term magnitude (harness.compare.allclose): the kernels
    # compute in fp32 whatever their input dtype, so it is fp32's, not the output dtype's
    terms_rtol: float = 1e-5
    model: ErrorModel = ErrorModel.TABLE


TABLE: dict[torch.dtype, Tolerance] = {
    torch.float32: Tolerance(1e-5, 1e-4, "the tutorial's, fp32"),
    torch.float16: Tolerance(3e-3, 3e-3, "the tutorial's, fp16: about 3 ulps at 1.0"),
    torch.bfloat16: Tolerance(1.6e-2, 1.6e-2, "2 bf16 ulps at 1.0: interpreter truncation + oracle rounding"),
    torch.float64: Tolerance(1e-10, 1e-9, "double arithmetic", terms_rtol=1e-12),
}


def for_dtype(dtype: torch.dtype) -> Tolerance:
    try:
        return TABLE[dtype]
    except KeyError:
        raise KeyError(f"no tolerance for dtype {dtype}; add a row to harness/compare/tolerances.py TABLE") from None


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
    """The tolerance and magnitude of one value check of a kernel whose ``Contract(precision=...)``
    adds ``roundings`` roundings of ``dtype`` (default: the input dtype) on the terms (``terms``,
    else the table model's magnitude, else |expected|) to what the op's error model allows;
    ``tol.why`` says so, and with it every record the declaration widens. ``roundings`` None: what
    ``precision`` declares."""
    if roundings is None:
        roundings, dtype = declared_roundings(precision, in_dtype)
    dtype = dtype or in_dtype
    if roundings <= 0:
        return tol, magnitude
    extra = roundings * UNIT_ROUNDOFF[dtype]
    why = f"{tol.why}; {declaration(precision, roundings, dtype)}"
    if tol.model == "rounding":  # the magnitude is an allowance added as is (terms_rtol = 1)
        size = (terms if terms is not None else expected).detach().to(torch.float64).abs()
        size = torch.where(torch.isfinite(size), size, torch.zeros_like(size))
        allowance = extra * size if magnitude is None else magnitude.to(torch.float64) + extra * size.to(magnitude.device)
        return dataclasses.replace(tol, rtol=max(tol.rtol, extra), why=why), allowance
    return dataclasses.replace(tol, rtol=max(tol.rtol, extra), terms_rtol=max(tol.terms_rtol, extra), why=why), magnitude
