"""What the kernel tests (tests/test_kernel_*.py, tests/test_fused_linear_ce_*.py) share: the
oracle comparison under the harness's own tolerance table, a spread of cases over layouts and
value kinds, and the check that an out-of-contract call raises before any launch."""

from __future__ import annotations

import pytest
import torch

from harness.compare.allclose import compare
from harness.compare.tolerances import for_dtype


def assert_close(name, actual, expected, magnitude, dtype):
    """``actual`` has ``dtype``, ``expected``'s shape, and matches it within the table's tolerance."""
    assert actual.dtype == dtype and actual.shape == expected.shape, (name, actual.dtype, actual.shape)
    tol = for_dtype(dtype)
    result = compare(actual, expected.to(dtype), atol=tol.atol, rtol=tol.rtol, magnitude=magnitude, terms_rtol=tol.terms_rtol)
    assert result.passed, f"{name}: {result.message}"


def spread_cases(shapes, dtypes, layouts, kinds=None) -> list[tuple]:
    """Each (shape, dtype) once, with a layout (and a value kind) that turn with it: every
    layout and kind meets every dtype without the whole product. ``(shape, dtype, layout[, kind])``."""
    cases = []
    for i, shape in enumerate(shapes):
        for j, dtype in enumerate(dtypes):
            case = (shape, dtype, layouts[(i + j) % len(layouts)])
            cases.append(case if kinds is None else (*case, kinds[(i + 2 * j) % len(kinds)]))
    return cases


class NoLaunch:
    """Stands in for a jit function: a launch (``kernel[grid](...)``) fails the test."""

    def __getitem__(self, grid):
        raise AssertionError("a kernel was launched for out-of-contract inputs")


def assert_rejected(call, args, error, words, *, no_launch=(), module=None, monkeypatch=None) -> None:
    """``call(*args)`` raises ``error`` naming ``words``, launches none of ``module``'s jit
    functions ``no_launch``, and leaves its first argument (a tensor) as it was."""
    for name in no_launch:
        monkeypatch.setattr(module, name, NoLaunch())
    first = args[0]
    before = first.clone() if isinstance(first, torch.Tensor) else None
    with pytest.raises(error) as err:
        call(*args)
    assert words in str(err.value)
    if before is not None:
        assert torch.equal(first, before)
