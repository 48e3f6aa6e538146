"""OpDecl's derived dims and named scalar modes (harness.registry.declare, harness.ops.derive):
a dim computed from the others is never drawn and always consistent, in the floor, the strategy
and a ``--case`` id; a Scalar may be a mode's name. Bug class: a floor that draws a dim the op
ties to another (an odd head dim for a rotation of pairs, a table shorter than its rows)."""

import pytest
import torch
from hypothesis import given, settings

from harness import OpDecl, Scalar, Tensor
from harness.cases.case import Case
from harness.errors import RegistryError, UsageError
from harness.ops import derive


def _pairs_op():
    """y = x[..., :D/2] * t[P, R] rows 0..S-1, a table wider than the rows it serves."""
    return derive.DeclaredOp(OpDecl(
        name="half_scale", signature="f(x[S, D], t[P, R], mode) -> y[S, D]",
        inputs=(Tensor("x", "S, D"), Tensor("t", "P, R", values="normal", differentiable=False),
                Scalar("mode", ("plain", "twice"))),
        output="S, D",
        reference=lambda x, t, mode: x * torch.cat([t[: x.shape[0]]] * 2, -1) * (2 if mode == "twice" else 1),
        value_kinds=("normal",),
        derived={"D": lambda s: 2 * s["R"], "P": lambda s: s["S"] + 3},
    ))


def _consistent(case):
    assert int(case["D"]) == 2 * int(case["R"]) and int(case["P"]) == int(case["S"]) + 3, case.id


def test_derived_dims_hold_in_every_floor_case_and_stay_within_budget():
    op = _pairs_op()
    assert op.free_dims == ("S", "R")
    cases = op.floor_cases(backend="interpreter")
    for case in cases:
        _consistent(case)
        assert int(case["S"]) * int(case["D"]) <= derive.BUDGET["interpreter"]
    assert {int(c["D"]) for c in cases} >= {2, 34, 130}  # R = 1, 17, 65: the floor's sizes, doubled
    assert {c["mode"] for c in cases} == {"plain", "twice"}
    x, t, mode = op.make_inputs(cases[0], "cpu").args
    assert x.shape[1] == 2 * t.shape[1] and t.shape[0] == x.shape[0] + 3 and mode in ("plain", "twice")


def test_generated_cases_compute_derived_dims():
    op = _pairs_op()

    @settings(max_examples=25, deadline=None, database=None)
    @given(op.case_strategy(backend="interpreter"))
    def check(case):
        _consistent(case)

    check()


def test_a_case_id_with_an_inconsistent_derived_dim_is_refused():
    op = _pairs_op()
    good = op.floor_cases(backend="interpreter")[0]
    op.validate_case(good)
    bad = Case.parse(good.id.replace(f"D={good['D']}", f"D={int(good['D']) + 1}"))
    with pytest.raises(UsageError, match="the other dims make D="):
        op.validate_case(bad)


def test_declaration_errors_name_the_fix():
    with pytest.raises(RegistryError, match="must map dims of the inputs"):
        OpDecl(name="bad", signature="", inputs=(Tensor("x", "M"),), output="M", reference=lambda x: x,
               value_kinds=("normal",), derived={"K": lambda s: 1})
    with pytest.raises(RegistryError, match="at least one must be drawn"):
        OpDecl(name="bad", signature="", inputs=(Tensor("x", "M"),), output="M", reference=lambda x: x,
               value_kinds=("normal",), derived={"M": lambda s: 1})
    with pytest.raises(RegistryError, match="mode names"):
        Scalar("mode", ("gelu tanh",))
    with pytest.raises(RegistryError, match="mode names"):
        Scalar("flag", (True, 1))  # bools only, or no bools: a flag is not a number
    assert Scalar("flag", (True, False)).is_flag
