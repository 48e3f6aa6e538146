"""The ``grad_modes`` check: a forward-only kernel is also called with autograd enabled (every float
input requiring grad) and under torch.inference_mode, each output against the oracle, beside the
case's own call and the refilled call B under torch.no_grad.

Bug class: a kernel right only in the mode it is usually called in (``if torch.is_grad_enabled()``,
a path taken under inference_mode)."""

from __future__ import annotations

import pytest
import torch

from harness.registry.registry import REGISTRY, Contract, KernelEntry
from harness.run.runner import run_case
from tests.fixtures import declared_io as io_kernels

CASES = io_kernels.spread("softmax", max_cases=2)


def _right(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def _wrong_with_autograd(x):
    return torch.zeros_like(x) if torch.is_grad_enabled() and x.requires_grad else _right(x)


def _wrong_in_inference_mode(x):
    return torch.zeros_like(x) if torch.is_inference_mode_enabled() else _right(x)


def _records(fn, contract=Contract(forward_only=True)):
    entry = KernelEntry("softmax", fn.__name__, fn, contract, "kernel", "plugin", __file__)
    return [r for c in CASES for r in run_case(REGISTRY.op("softmax"), entry, c, backend="interpreter",
                                                 device="cpu").records]


def test_a_right_forward_only_kernel_passes_every_mode():
    recs = _records(_right)
    modes = [r for r in recs if r.check == "grad_modes"]
    assert modes and all(r.passed for r in recs), [(r.check, r.message[:200]) for r in recs if not r.passed]
    assert "with autograd enabled" in modes[0].message and "torch.inference_mode" in modes[0].message


@pytest.mark.parametrize("fn, words", [(_wrong_with_autograd, "with autograd enabled (every float input requiring grad)"),
                                       (_wrong_in_inference_mode, "under torch.inference_mode")])
def test_a_kernel_wrong_in_one_mode_fails_grad_modes(fn, words):
    failed = [r for r in _records(fn) if not r.passed]
    assert failed and {r.check for r in failed} == {"grad_modes"}
    assert all(f"a forward {words} wrong" in r.message for r in failed)


def test_a_kernel_with_gradients_is_not_asked_again():
    assert "grad_modes" not in {r.check for r in _records(_right, Contract(waive={"dx": "forward only here"}))}
