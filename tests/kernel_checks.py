"""What the kernel tests (tests/test_kernel_*.py, tests/test_fused_linear_ce_*.py) share: the
comparison with their op's own oracle and error model (what verify judges a case by), a spread of
cases over layouts and value kinds, and the check that an out-of-contract call raises before any
launch."""

from __future__ import annotations

import pytest
import torch

from harness.cases.case import Case
from harness.compare import nonfinite
from harness.ops import checks
from harness.registry.opspec import OpInputs
from harness.registry.registry import REGISTRY, load_builtin_ops


def assert_close(op, args, upstream, **actual):
    """Each of ``actual`` (check name -> tensor: an output of a kernel call on ``args``, or the
    gradient it gave for ``upstream``, the gradient of the loss with respect to its output) has the
    input dtype and matches op ``op``'s float64 oracle on the same ``args`` within the op's own
    error model, as verify compares a case (harness.run.runner)."""
    load_builtin_ops()
    spec = REGISTRY.op(op)
    dtype = next(a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
    grad_wrt = tuple(p for p, i in enumerate(spec.decl.inputs) if i in spec.decl.differentiable)
    inputs = OpInputs(args=tuple(args), grad_wrt=grad_wrt, upstream=upstream, dtype=dtype, layout="as given")
    expected = nonfinite.add_limits(spec.oracle(inputs), inputs, spec.oracle)
    case = Case.of(op, dtype=str(dtype).removeprefix("torch."))
    unknown = sorted(set(actual) - set(spec.value_checks()))
    assert not unknown, f"{op} has no value check {unknown}; its checks: {spec.value_checks()}"
    for check, got in actual.items():
        # a case whose every row is ignored has its forward check under its own name (ALL_IGNORED)
        name = spec.oracle_forward_name(inputs) if check == spec.forward_check else check
        assert got.dtype == dtype and got.shape == expected[name].shape, (name, got.dtype, got.shape)
        tol = spec.tolerance(name, case, dtype)
        result = checks.values(got, expected[name], dtype, tol, expected.get(f"{name}_magnitude"),
                               expected.get(f"{name}_nan_ok"), expected.get(f"{name}_limit"))
        assert result.passed, f"{op} {check}: {result.message}"


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
