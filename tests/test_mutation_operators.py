"""properties.mutation_operators: each operator yields the change of its bug class, and only that."""

import ast
import textwrap

import pytest

from harness.mutation.mutagen import _scope, _visit
from properties.mutation_operators import OPERATORS

KERNEL = textwrap.dedent(
    """
    @triton.jit
    def k(X, Y, OUT, stride_xm, stride_xn, N, M, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(X + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
        s = tl.sum(x * x, axis=0) / N + eps
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for r in range(0, M):
            acc += x * 2.0
        tl.atomic_add(OUT + cols, acc, mask=mask)
        tl.store(Y + row * N + cols, x * s, mask=mask)
    """
)


def mutants(operator: str) -> list[str]:
    fn = ast.parse(KERNEL).body[0]
    visited = _visit(fn)
    scope = _scope(fn, visited)
    out = []
    for node, _, _, _ in visited:
        for new in OPERATORS[operator](node, scope):
            out.append(ast.unparse(new))
    return out


def test_the_table_has_every_operator_the_issue_names():
    assert set(OPERATORS) >= {
        "size_block_swap", "mask_lt_to_le", "drop_mask", "other_zero_to_one", "sum_to_max", "sum_to_mean",
        "drop_upcast", "add_sub_swap", "mul_div_swap", "constant_perturb", "stride_change", "loop_bound",
        "atomic_to_rmw", "program_id_swap",
    }


def test_size_block_swap_leaves_shapes_alone():
    # bug class: dividing by / striding with the padded BLOCK; BLOCK in a shape would never compile
    got = mutants("size_block_swap")
    assert "BLOCK" in got  # N -> BLOCK
    assert all("arange" not in g and "zeros" not in g for g in got)


def test_mask_and_load_operators():
    assert "cols <= N" in mutants("mask_lt_to_le")
    dropped = mutants("drop_mask")
    assert any(g.startswith("tl.load(") and "mask" not in g and "other" not in g for g in dropped)
    assert any(g.startswith("tl.atomic_add(") and "mask" not in g for g in dropped)
    assert mutants("other_zero_to_one") == ["tl.load(X + row * stride_xm + cols * stride_xn, mask=mask, other=1.0)"]


def test_reduction_and_precision_operators():
    assert mutants("sum_to_max") == ["tl.max(x * x, axis=0)"]
    assert mutants("sum_to_mean") == ["tl.sum(x * x, axis=0) / (x * x).shape[0]"]
    assert mutants("drop_upcast") == ["tl.load(X + row * stride_xm + cols * stride_xn, mask=mask, other=0.0)"]


def test_arithmetic_operators():
    assert "tl.sum(x * x, axis=0) / N - eps" in mutants("add_sub_swap")
    assert "acc -= x * 2.0" in mutants("add_sub_swap")
    assert "tl.sum(x * x, axis=0) * N" in mutants("mul_div_swap")
    assert not any("stride_xm" in g and "/" in g for g in mutants("mul_div_swap"))  # pointer offsets untouched


def test_constant_perturb_skips_shapes_axes_and_other():
    got = mutants("constant_perturb")
    assert "2.0 + 1" not in got and "3.0" in got  # the scale 2.0 -> 3.0
    assert "1" in got  # range start 0 -> 1
    assert len(got) == 2  # not arange's 0, not axis=0, not other=0.0, not program_id(0)


def test_stride_offset_and_loop_operators():
    strides = mutants("stride_change")
    assert strides.count("1") == 2 and "stride_xn" in strides and "stride_xm" in strides
    # (X + row * stride_xm) + cols * stride_xn loses its column term, then its row term; Y its row term
    assert mutants("drop_offset_term") == ["X + row * stride_xm", "X", "Y"]
    assert mutants("loop_bound") == ["range(0, M + 1)", "range(0, M - 1)"]


def test_atomic_becomes_racy_read_modify_write():
    assert mutants("atomic_to_rmw") == ["tl.store(OUT + cols, tl.load(OUT + cols, mask=mask) + acc, mask=mask)"]


def test_program_id_axis_swap():
    assert mutants("program_id_swap") == ["tl.program_id(1)"]


@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_operators_do_not_modify_their_input(operator):
    fn = ast.parse(KERNEL).body[0]
    before = ast.dump(fn)
    visited = _visit(fn)
    scope = _scope(fn, visited)
    for node, _, _, _ in visited:
        list(OPERATORS[operator](node, scope))
    assert ast.dump(fn) == before
