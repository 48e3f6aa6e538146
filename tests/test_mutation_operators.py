"""harness.mutation.operators: each operator yields the change of its bug class, and only that."""

import ast
import textwrap

import pytest

from harness.mutation.mutagen import _scope, _visit
from harness.mutation.operators import BACKENDS, HOST_OPERATORS, OPERATORS

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


# the spellings the GPU / softmax-family operators must recognise, and look-alikes they must not touch
SOFTMAX_KERNEL = textwrap.dedent(
    """
    @triton.jit
    def k(X, Y, T, N, M, lo, stride, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        rows = tl.cast(row, tl.int64) + tl.arange(0, BLOCK)
        wide = cols.to(tl.float32)
        a = tl.load(X + row * stride + cols, mask=cols < N, other=-float("inf"))
        b = tl.load(X + cols, mask=(cols < N) & (cols >= lo), other=float("-inf"))
        c = tl.load(X + cols, mask=cols < N, other=-math.inf)
        d = tl.load(X + cols, mask=cols < N, other=0.0)
        e = tl.load(X + cols, mask=cols < N, other=float("inf"))
        ok = row_ok[:, None] & (cols[None, :] < N)
        ok &= cols < M
        bits = cols & 0xFF
        m = tl.max(a, axis=0)
        s = tl.sum(tl.exp2((a - m) * LOG2E), 0)
        r = tl.reduce(a, 0, combine)
        i = tl.argmax(a, axis=1)
        t = tl.sum(a)
        p = tl.exp2(a * 1.4426950408889634) + tl.exp2(a * 2.0) + tl.exp2(a * (scale * log2e))
        q = tl.where(ok, a, 0.0)
        tl.debug_barrier()
        tl.store(Y + cols, tl.where(cols < N, p, q), mask=cols < N)
    """
)


def mutants(operator: str, kernel: str = KERNEL) -> list[str]:
    fn = ast.parse(kernel).body[0]
    visited = _visit(fn)
    scope = _scope(fn, visited)
    out = []
    for node, _, _, _ in visited:
        for new in OPERATORS[operator](node, scope):
            out.append(ast.unparse(new))
    return out


# host code: the launches of a wrapper (HOST_OPERATORS)
HOST = textwrap.dedent(
    """
    @triton.jit
    def k(X, R, G, stride_xm, stride_xn, stride_rm, stride_rn, stride_g, BLOCK: tl.constexpr):
        pass

    @triton.jit
    def rot(X, COS, SIN, n, stride_xb, stride_xs, stride_xd, stride_cp, stride_cr, stride_sp, stride_sr, BLOCK: tl.constexpr):
        pass

    def wrapper(x, residual, gamma, cos, sin):
        y = torch.empty_like(x)
        t = x.contiguous()
        w = (x * 2).contiguous()
        launch(k, grid, x, residual, gamma, x.stride(0), x.stride(1), residual.stride(0), residual.stride(1), gamma.stride(0), BLOCK=4)
        k[grid](x, residual, gamma, x.stride(-2), x.stride(-1), residual.stride(-2), residual.stride(-1), gamma.stride(0), BLOCK=4)
        launch(rot, grid, x, cos, sin, 3, *x.stride(), *cos.stride(), *sin.stride(), BLOCK=4)
        launch(rot, grid, x, cos, sin, *x.stride(), *cos.stride(), *sin.stride(), BLOCK=4)
        helper(x.stride(0), residual.stride(0), y.stride(0))
        k[grid](x, y, gamma, x.stride(0), x.stride(1), y.stride(0), y.stride(1), gamma.stride(0), BLOCK=4)
    """
)


def host_mutants(operator: str) -> list[str]:
    tree = ast.parse(HOST)
    kernels = {fn.name: tuple(a.arg for a in fn.args.args) for fn in tree.body[:2]}
    fn = tree.body[2]
    visited = _visit(fn)
    scope = _scope(fn, visited, kernels)
    before = ast.dump(fn)
    out = [ast.unparse(new) for node, _, _, _ in visited for new in HOST_OPERATORS[operator](node, scope)]
    assert ast.dump(fn) == before
    return out


def test_stride_swap_passes_one_inputs_stride_for_anothers_of_the_same_rank():
    # bug class: one input read with another's strides (a copied launch argument list)
    assert host_mutants("stride_swap") == [
        "residual.stride(0)", "residual.stride(1)", "x.stride(0)", "x.stride(1)",  # launch(k, grid, ...)
        "residual.stride(-2)", "residual.stride(-1)", "x.stride(-2)", "x.stride(-1)",  # k[grid](...)
        "*sin.stride()", "*cos.stride()",  # x is 3-D (three stride_x* parameters), cos and sin 2-D
    ]  # not: gamma (rank 1 alone), a star launch whose arguments do not match rot's parameters,
    # a call that is not a launch, y (not an input of the wrapper)


def test_drop_contiguous_only_for_an_input_of_the_wrapper():
    assert host_mutants("drop_contiguous") == ["x"]


def test_mutagen_applies_the_host_table_to_a_modules_other_functions():
    from harness.mutation import mutagen

    found = {(m.function, m.operator) for m in mutagen.mutations("kernels.swiglu")}
    assert ("_forward", "stride_swap") in found and ("_backward", "stride_swap") in found
    assert not any(op in HOST_OPERATORS for f, op in found if f.startswith("_swiglu"))
    assert not any(op in OPERATORS for f, op in found if f in ("_forward", "_backward"))


def test_the_table_has_every_documented_operator():
    assert set(OPERATORS) >= {
        "size_block_swap", "mask_lt_to_le", "drop_mask", "other_zero_to_one", "sum_to_max", "sum_to_mean",
        "drop_upcast", "add_sub_swap", "mul_div_swap", "constant_perturb", "stride_change", "loop_bound",
        "atomic_to_rmw", "program_id_swap", "drop_barrier", "drop_int64_cast", "other_neg_inf_to_zero",
        "reduction_axis_swap", "where_branch_swap", "mask_and_to_or", "exp2_drop_log2e",
    }


def test_gpu_only_operators_name_their_backend():
    # bug class: a race or an int32 overflow counted as a CPU survivor instead of listed apart
    assert BACKENDS == {"drop_barrier": ("cuda",), "drop_int64_cast": ("cuda",)}
    assert set(BACKENDS) <= set(OPERATORS)


def test_drop_barrier_and_drop_int64_cast():
    assert mutants("drop_barrier", SOFTMAX_KERNEL) == ["pass"]
    # .to(tl.int64) and tl.cast(x, tl.int64) lose the cast; .to(tl.float32) is drop_upcast's, untouched
    assert mutants("drop_int64_cast", SOFTMAX_KERNEL) == ["tl.program_id(0)", "row"]
    assert mutants("drop_barrier") == [] and mutants("drop_int64_cast") == []


def test_other_neg_inf_to_zero_knows_the_spellings_of_minus_infinity():
    got = mutants("other_neg_inf_to_zero", SOFTMAX_KERNEL)
    assert len(got) == 3 and all(g.endswith("other=0.0)") for g in got)  # not other=0.0, not +inf
    assert [g.split(", mask=")[0] for g in got] == ["tl.load(X + row * stride + cols", "tl.load(X + cols", "tl.load(X + cols"]


def test_reduction_axis_swap_by_keyword_and_position_only_with_a_literal_axis():
    assert mutants("reduction_axis_swap", SOFTMAX_KERNEL) == [
        "tl.max(a, axis=1)", "tl.sum(tl.exp2((a - m) * LOG2E), 1)", "tl.reduce(a, 1, combine)", "tl.argmax(a, axis=0)",
    ]  # tl.sum(a) has no axis to swap
    assert mutants("reduction_axis_swap") == ["tl.sum(x * x, axis=1)"]
    # a positional axis (of tl.sum, tl.reduce, ...) is this operator's, never constant_perturb's 0 -> 1
    assert "1" not in mutants("constant_perturb", SOFTMAX_KERNEL)


def test_where_branch_swap_and_mask_and_to_or():
    assert mutants("where_branch_swap", SOFTMAX_KERNEL) == ["tl.where(ok, 0.0, a)", "tl.where(cols < N, q, p)"]
    # masks combined by & (also &=) become |; integer bit arithmetic with a literal is left alone
    assert mutants("mask_and_to_or", SOFTMAX_KERNEL) == [
        "(cols < N) | (cols >= lo)", "row_ok[:, None] | (cols[None, :] < N)", "ok |= cols < M",
    ]


def test_exp2_drop_log2e_drops_only_a_log2e_factor():
    assert mutants("exp2_drop_log2e", SOFTMAX_KERNEL) == ["a - m", "a", "scale"]  # not a * 2.0


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


@pytest.mark.parametrize("kernel", [KERNEL, SOFTMAX_KERNEL], ids=["kernel", "softmax_kernel"])
@pytest.mark.parametrize("operator", sorted(OPERATORS))
def test_operators_do_not_modify_their_input(operator, kernel):
    fn = ast.parse(kernel).body[0]
    before = ast.dump(fn)
    visited = _visit(fn)
    scope = _scope(fn, visited)
    for node, _, _, _ in visited:
        list(OPERATORS[operator](node, scope))
    assert ast.dump(fn) == before
