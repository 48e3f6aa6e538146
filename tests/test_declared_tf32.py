"""Contract(precision=("tfloat32", N)): N roundings of TF32 (2^-11, 2^13 fp32 roundings each) on
the terms of fp32 cases only; other dtypes keep the op's error model. Bug class: a precision
declaration that cannot reach a real GPU default (TF32 is 8192 fp32 roundings, beyond the
4096 a ("float32", N) declaration may give)."""

import pytest
import torch

from harness import Contract, RegistryError
from harness.compare import tolerances


def test_tfloat32_roundings_count_in_fp32_units_on_fp32_cases_only():
    assert tolerances.declared_roundings(("tfloat32", 2), torch.float32) == (2 * 2**13, torch.float32)
    assert tolerances.declared_roundings(("tfloat32", 2), torch.bfloat16)[0] == 0.0
    assert tolerances.declared_roundings(("tfloat32", 2), torch.float16)[0] == 0.0
    assert tolerances.declared_roundings(("float32", 64), torch.float32) == (64.0, torch.float32)  # unchanged


def test_the_widened_record_names_the_declaration():
    tol = tolerances.Tolerance(1e-7, 1e-7, why="spread", terms_rtol=1.0)
    e = torch.ones(3, dtype=torch.float64)
    wide, magnitude = tolerances.declared_precision(tol, torch.zeros(3), e, e, torch.float32, precision=("tfloat32", 2.0))
    assert torch.allclose(magnitude, torch.full((3,), 2 * 2.0**-11, dtype=torch.float64))
    assert "tfloat32" in wide.why and "16384 float32 roundings" in wide.why


def test_contract_accepts_tfloat32_and_rejects_unknown_formats():
    assert Contract(precision=("tfloat32", 2)).precision == ("tfloat32", 2.0)
    with pytest.raises(RegistryError, match="tfloat32"):
        Contract(precision=("tf32", 2))
