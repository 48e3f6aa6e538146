"""harness.ops.beyond: an op declared from a reference gets a case per varying dim at four times the
example's size (the other dims small), past the floor's budget; on a GPU past 4096 rows and 65536
columns.

Bug class: a kernel right only up to the example's size (a loop over its first 1024 rows), which
no case larger than the example could show."""

from __future__ import annotations

import torch

import harness
from harness.cases.case import Case
from harness.registry.registry import Contract, KernelEntry
from harness.run.runner import run_case
from harness.ops import beyond

EXAMPLE = (torch.randn(1024, 32),)


def _op():
    return harness.from_reference(lambda x: x * torch.sigmoid(x), EXAMPLE, vary="auto", name="ref_swish_1024",
                                  differentiable=False, register=False)


def test_each_varying_dim_goes_four_times_past_the_example():
    op = _op()
    assert op.varying == ("x_0", "x_1")
    assert beyond.shapes(op, "interpreter") == [{"x_0": 4096, "x_1": 7}, {"x_0": 7, "x_1": 128}]
    assert beyond.shapes(op, "cuda") == [{"x_0": 4097, "x_1": 7}, {"x_0": 7, "x_1": 65537}]
    floor = {c.id for c in op.floor_cases(backend="interpreter")}
    assert {c.id for c in beyond.cases(op, "interpreter")} <= floor
    assert max(c["x_0"] for c in op.floor_cases(backend="interpreter")) == 4096  # the floor alone stops at 320 rows


def test_a_kernel_right_only_up_to_the_example_fails_there():
    op = _op()

    def right(x):
        return (x.float() * torch.sigmoid(x.float())).to(x.dtype)

    def up_to_size(x):  # rows past the example's 1024 left as they came in
        out = x.clone()
        out[:1024] = right(x[:1024])
        return out

    def failed(fn):
        entry = KernelEntry(op.name, fn.__name__, fn, Contract(forward_only=True), "kernel", "plugin", __file__)
        return {c.id for c in op.floor_cases(backend="interpreter")[:1] + beyond.cases(op, "interpreter")
                if not all(r.passed for r in run_case(op, entry, c, backend="interpreter", device="cpu").records)}

    assert failed(right) == set()
    assert failed(up_to_size) == {beyond.cases(op, "interpreter")[0].id}
    assert isinstance(Case.parse(beyond.cases(op, "interpreter")[0].id), Case)
