"""A declared op with a flag input (harness.registry.declare.Scalar of bools): the case id
writes it true / false, the reference and the kernel receive a bool, and a kernel that reads
the flag the wrong way round fails."""

import pytest
import torch

from harness.cases.case import Case
from harness.errors import RegistryError
from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.registry import Contract, KernelEntry
from harness.run.runner import run_case
from harness.ops.derive import DeclaredOp

SEEN = []


def _reference(x, flip):
    SEEN.append(flip)
    return -x if flip else x


DECL = OpDecl(name="flagged_neg", signature="f(x[M, N], flip: bool) -> y[M, N]",
              inputs=(Tensor("x", "M, N"), Scalar("flip", (True, False))), output="M, N",
              reference=_reference, value_kinds=("normal",))


def test_a_flag_is_written_true_or_false_and_comes_back_a_bool():
    spec = DeclaredOp(DECL)
    cases = spec.floor_cases(backend="interpreter")
    assert {c["flip"] for c in cases} == {"true", "false"}
    case = next(c for c in cases if c["flip"] == "true")
    assert Case.parse(case.id) == case and ",flip=true," in case.id
    inputs = spec.make_inputs(case, "cpu")
    assert inputs.args[1] is True


def test_a_kernel_reading_the_flag_backwards_fails_and_the_right_one_passes():
    spec = DeclaredOp(DECL)
    case = Case.parse("flagged_neg:M=3,N=5,dtype=float32,layout=contiguous,values=normal,flip=true,seed=1")

    def run(fn):
        entry = KernelEntry("flagged_neg", fn.__name__, fn, Contract(), "kernel", "test", "here")
        return {r.check: r.passed for r in run_case(spec, entry, case, backend="interpreter", device="cpu").records}

    def right(x, flip):
        assert isinstance(flip, bool)
        return -x if flip else x.clone()

    def backwards(x, flip):
        return x.clone() if flip else -x

    assert run(right)["forward"] and SEEN and all(isinstance(f, bool) for f in SEEN)
    assert not run(backwards)["forward"]


@pytest.mark.parametrize("values", [(True, 1), (), (1, "a")])
def test_a_flag_is_bools_only(values):
    with pytest.raises(RegistryError, match="bools only"):
        Scalar("flag", values)


def test_a_flag_case_value_must_be_true_or_false():
    with pytest.raises(RegistryError, match="true or false"):
        Scalar("flag", (True, False)).from_case(1)
