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

import torch


@dataclasses.dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    why: str = ""
    # relative error allowed against the oracle's term magnitude (harness.compare.allclose): the kernels
    # compute in fp32 whatever their input dtype, so it is fp32's, not the output dtype's
    terms_rtol: float = 1e-5
    # "table": atol/rtol from TABLE, the magnitude is the size of the terms; "rounding": the
    # magnitude is the spread of the reference under the input dtype's rounding
    # (harness.compare.rounding), allowed as is, so |err| / allowed reads in units of that rounding
    model: str = "table"


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
