"""Declared ops (harness.registry.declare, harness.ops.derive): torch itself passes every case,
obvious bugs fail, an op declared in a plugin runs end to end, the references are right."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness import OpDecl, Tensor
from harness.cases.case import Case
from harness.compare.allclose import compare
from harness.errors import RegistryError
from harness.registry.registry import REGISTRY, load_builtin_ops, register_op
from harness.run.runner import run_case
from harness.run.suite import SuitePlan, run_suite
from harness.ops import derive, layouts

ROOT = Path(__file__).resolve().parent.parent
DECLARED = ("layer_norm", "softmax", "swiglu", "cross_entropy")
CHECKS = {
    "layer_norm": {"forward", "dx", "dweight", "dbias"},
    "softmax": {"forward", "dx"},
    "swiglu": {"forward", "da", "db"},
    "cross_entropy": {"loss", "dlogits", "all_ignored"},
}


def harness(*args, timeout=900):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def spec(op):
    load_builtin_ops()
    return REGISTRY.op(op)


# --- the contract: torch passes, bugs fail -------------------------------------------------

def test_torch_fp32_implementations_pass_every_generated_case(tmp_path):
    proc = harness("verify", "--plugin", "tests/fixtures/torch_reference_ops.py", "--backend", "interpreter",
                   "--max-examples", "20", "--select", "torch_fp32", "--report-dir", str(tmp_path), "--no-render")
    report = json.loads((tmp_path / "verify.json").read_text())
    kernels = {k["op"]: k for k in report["kernels"]}
    assert set(DECLARED) <= set(kernels), proc.stderr
    for op in DECLARED:
        k = kernels[op]
        assert k["passed"] and k["failed"] == 0, (op, proc.stdout[-3000:])
        assert k["cases"] >= len(spec(op).floor_cases(backend="interpreter")) + 1  # floor + generated
        assert CHECKS[op] <= set(k["checks"]), (op, k["checks"])
    assert proc.returncode == 0, proc.stdout[-3000:]


WRONG = [
    # (kernel, a case it must fail, the check that fails there)
    ("wrong_no_max", "softmax:M=3,N=65,dtype=float16,layout=contiguous,values=large_logits,seed=1", "forward"),
    ("wrong_unbiased_var", "layer_norm:M=3,N=17,dtype=float32,layout=contiguous,values=normal,eps=1e-05,seed=1", "forward"),
    ("wrong_sigmoid_b", "swiglu:M=3,N=17,dtype=float32,layout=contiguous,values=normal,seed=1", "forward"),
    ("wrong_mean_all_rows",
     "cross_entropy:N=17,V=33,dtype=float32,layout=contiguous,values=normal,ignore_index=-100,ignored=some,seed=1", "loss"),
    # a row masked with -1e9 is a row of zeros once shifted by its max (shift_by_max): uniform
    ("wrong_padding_minus_1e9", "softmax:M=3,N=17,dtype=float32,layout=contiguous,values=masked_rows,seed=1", "forward"),
    ("wrong_exp_minus_lse", "softmax:M=3,N=17,dtype=float32,layout=contiguous,values=masked_rows,seed=1", "forward"),
    # entries of -inf (neg_inf) make an unguarded online rescaling NaN
    ("wrong_online_unguarded", "softmax:M=3,N=17,dtype=float32,layout=contiguous,values=neg_inf,seed=1", "forward"),
    ("wrong_online_unguarded",
     "cross_entropy:N=5,V=17,dtype=float32,layout=contiguous,values=neg_inf,ignore_index=-100,ignored=none,seed=1",
     "loss"),
]


@pytest.fixture(scope="module")
def wrong_plugin():
    from harness.registry import loader

    loader.load_all(plugins=["tests/fixtures/torch_wrong_ops.py"])


@pytest.mark.parametrize("kernel, case_id, check", WRONG)
def test_obviously_wrong_variants_fail(wrong_plugin, kernel, case_id, check):
    case = Case.parse(case_id)
    entry = REGISTRY.get(case.op, kernel)
    run = run_case(spec(case.op), entry, case, backend="interpreter", device="cpu")
    failed = {r.check: r for r in run.records if not r.passed}
    assert check in failed, [(r.check, r.passed, r.message[:100]) for r in run.records]
    if "Non-finite" not in failed[check].message:  # a finite error says how many roundings off it is
        assert "x the allowed rounding of the terms" in failed[check].message
    # and the floor alone catches it too
    records = run_suite(spec(case.op), entry, SuitePlan(backend="interpreter", seed=0, max_examples=0,
                                                        stop_at_first_failure=True), device="cpu")
    assert any(not r.passed for r in records)


def test_all_ignored_cross_entropy_returning_zero_fails_under_its_own_name():
    s = spec("cross_entropy")
    case = next(c for c in s.floor_cases(backend="interpreter") if c["ignored"] == "all")
    import torch.nn.functional as F
    from harness.registry.registry import Contract, KernelEntry

    def zero_when_empty(logits, target, ignore_index=-100):
        loss = F.cross_entropy(logits.float(), target, ignore_index=ignore_index).to(logits.dtype)
        return torch.nan_to_num(loss, nan=0.0)

    entry = KernelEntry("cross_entropy", "zero", zero_when_empty, Contract(), "kernel", "project", "here")
    run = run_case(s, entry, case, backend="interpreter", device="cpu")
    failed = {r.check for r in run.records if not r.passed}
    assert failed == {"all_ignored"}


# --- an op declared in a plugin ------------------------------------------------------------

PLUGIN = '''
import torch
from harness import OpDecl, Scalar, Tensor, register_kernel, register_op

register_op(OpDecl(
    name="plugin_axpb",
    signature="f(x[M, N], b[N], alpha: float) -> y[M, N]",
    inputs=(Tensor("x", "M, N"), Tensor("b", "N", values="normal"), Scalar("alpha", (0.5, -3.0))),
    output="M, N",
    reference=lambda x, b, alpha: alpha * x + b,
    value_kinds=("normal", "huge", "nonfinite"),
))

@register_kernel("plugin_axpb", name="good")
def good(x, b, alpha):
    return (alpha * x.float() + b.float()).to(x.dtype)

@register_kernel("plugin_axpb", name="bad")
def bad(x, b, alpha):
    return (alpha * x.float() + b.float().flip(0)).to(x.dtype)
'''


def test_an_op_declared_in_a_plugin_verifies_end_to_end(tmp_path):
    plugin = tmp_path / "axpb.py"
    plugin.write_text(PLUGIN)
    proc = harness("verify", "--plugin", str(plugin), "--op", "plugin_axpb", "--backend", "interpreter",
                   "--max-examples", "5", "--report-dir", str(tmp_path / "out"), "--no-render")
    assert proc.returncode == 1, proc.stderr
    report = json.loads((tmp_path / "out" / "verify.json").read_text())
    kernels = {k["name"]: k for k in report["kernels"]}
    assert kernels["good"]["passed"] and kernels["good"]["cases"] > 40
    assert not kernels["bad"]["passed"] and kernels["bad"]["checks"]["forward"]["failed"] > 0
    assert kernels["good"]["checks"]["db"]["passed"] > 0  # gradients derived by float64 autograd
    failure = next(c for c in report["cases"] if not c["passed"] and c["check"] == "forward")
    assert "--plugin" in failure["repro"] and failure["case_id"].startswith("plugin_axpb:M=")


def test_the_worked_example_plugin_passes_with_both_kernels(tmp_path):
    for case in ("scaled_tanh:M=17,N=257,dtype=float32,layout=transposed,values=tiny,scale=2.0,seed=1",
                 "scaled_tanh:M=7,N=1023,dtype=bfloat16,layout=col_sliced,values=gate_extremes,scale=-1.5,seed=2"):
        proc = harness("verify", "--plugin", "examples/plugins/scaled_tanh.py", "--case", case,
                       "--backend", "interpreter", "--report-dir", str(tmp_path), "--no-render")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
        report = json.loads((tmp_path / "verify.json").read_text())
        assert {k["name"] for k in report["kernels"] if k["passed"]} == {"torch_fp32", "triton"}


# --- the declared references -----------------------------------------------------------------

def _small_args(op):
    s = spec(op)
    scalars = {p.name: p.values[0] for p in s.scalars}
    ignored = "some" if s.ignorable is not None else None
    case = s.case({d: 4 for d in s.dims}, torch.float32, "contiguous", "normal", scalars, ignored, seed=1)
    inputs = s.make_inputs(case, "cpu")
    args = [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in inputs.args]
    return s, args, inputs.grad_wrt


@pytest.mark.parametrize("op", DECLARED)
def test_gradcheck_of_the_declared_reference(op):
    s, args, wrt = _small_args(op)
    leaves = [a.requires_grad_() if p in wrt else a for p, a in enumerate(args)]

    def f(*diff):
        full = list(leaves)
        for p, d in zip(wrt, diff):
            full[p] = d
        return s.decl.reference(*full)

    assert torch.autograd.gradcheck(f, [leaves[p] for p in wrt])
    if s.decl.backward is not None:  # the explicit formula agrees with autograd
        out = f(*[leaves[p] for p in wrt])
        dy = torch.randn_like(out)
        auto = torch.autograd.grad(out, [leaves[p] for p in wrt], dy)
        explicit = s.decl.backward(*[a.detach() if isinstance(a, torch.Tensor) else a for a in leaves], dy)
        for a, e in zip(auto, explicit):
            torch.testing.assert_close(a, e)


# --- what the engine derives -------------------------------------------------------------------

@pytest.mark.parametrize("op", DECLARED)
def test_floor_cases_cover_sizes_layouts_kinds_and_stay_within_budget(op):
    s = spec(op)
    floor = s.floor_cases(backend="interpreter")
    ids = [c.id for c in floor]
    assert len(set(ids)) == len(ids)
    row = next(iter(s.inner))
    sizes = {int(c[row]) for c in floor}
    assert {1, 17, 257, 4097, 8191} <= sizes  # beyond 4096 in the interpreter
    # the leading-dim cases (harness.ops.leading) add layouts of their own; the apart ones (harness.ops.apart) come beside the picks
    assert {c["layout"] for c in floor if not c.get("lead")} == set(s.layouts) | set(s.apart_layouts)
    assert set(s.layouts) >= set(layouts.LAYOUTS)
    # two or more tensors (the upstream gradient counted): one floor case at least places them in different layouts
    assert layouts.MIXED in s.layouts
    assert {c["values"] for c in floor} == set(s.decl.value_kinds)
    assert {c["dtype"] for c in floor} == {"float32", "float16", "bfloat16"}
    for c in floor:
        inputs = s.make_inputs(c, "cpu")
        assert max(a.numel() for a in inputs.args if isinstance(a, torch.Tensor)) <= derive.BUDGET["interpreter"]
        assert all(int(c[d]) <= derive.MAX_ROWS["interpreter"] for d in s.dims if d not in s.inner)
    assert all(Case.parse(i).id == i for i in ids)  # ids round-trip through --case
    assert 16385 in {int(c[row]) for c in s.floor_cases(backend="cuda")}


@pytest.mark.parametrize("op", DECLARED)
@pytest.mark.parametrize("backend", ["interpreter", "cuda"])
def test_every_floor_shape_has_the_plain_case_a_narrowed_kernel_takes(op, backend):
    # bug class: a kernel (or a library wrapper) that takes only contiguous fp32 inputs never meets
    # some floor sizes, e.g. V = 32769 with ignored rows, where Liger-Kernel's cross-entropy
    # mutant `loop_bound.2` (the ignored row's last tile left unzeroed) survived (run 42)
    s = spec(op)
    floor = s.floor_cases(backend=backend)
    shapes = {tuple(int(c[d]) for d in s.dims) for c in floor
              if c.get("wide") is None and "index_width" not in c["layout"] and not c.get("lead")}
    plain = {}
    for c in floor:
        if c["layout"] == "contiguous" and c["dtype"] == "float32":
            plain.setdefault(tuple(int(c[d]) for d in s.dims), set()).add(c.get("ignored"))
    assert shapes <= set(plain), sorted(shapes - set(plain))[:5]
    if s.ignorable is not None:
        rows = [d for d in s.dims if d in s.ignorable.shape]
        for shape, ignored in plain.items():
            many_rows = math.prod(shape[s.dims.index(d)] for d in rows) > 1
            assert not many_rows or "some" in ignored, shape

def test_every_tensor_input_gets_the_layout_and_3d_inputs_a_permuted_view():
    s = spec("layer_norm")
    case = next(c for c in s.floor_cases(backend="interpreter") if c["layout"] == "transposed" and int(c["M"]) > 1)
    x, w, b, _ = s.make_inputs(case, "cpu").args
    assert not x.is_contiguous() and w.stride() == (2,) and b.stride() == (2,)

    decl = OpDecl(name="batched_scale", signature="f(x[B, M, N]) -> y[B, M, N]", inputs=(Tensor("x", "B, M, N"),),
                  output="B, M, N", reference=lambda x: 2 * x, value_kinds=("normal",))
    op = derive.DeclaredOp(decl)
    permuted = [c for c in op.floor_cases(backend="interpreter") if c["layout"] == "permuted"]
    assert permuted
    x = op.make_inputs(permuted[0], "cpu").args[0]
    assert x.stride() == tuple(sorted(x.stride()))  # dims reversed in memory
    v = torch.arange(24.0).reshape(2, 3, 4)
    for layout in layouts.PERMUTED_LAYOUTS:
        placed = layouts.place(v, layout, "cpu")
        assert torch.equal(placed, v) and (layout == "contiguous" or layout == "offset" or not placed.is_contiguous())


def test_generated_cases_respect_the_budget():
    from hypothesis import given, settings

    s = spec("cross_entropy")

    @settings(max_examples=40, deadline=None, database=None)
    @given(s.case_strategy(backend="interpreter"))
    def check(case):
        assert int(case["N"]) * int(case["V"]) <= derive.BUDGET["interpreter"]
        assert int(case["N"]) <= derive.MAX_ROWS["interpreter"]
        if case["ignored"] == "some":
            assert int(case["N"]) > 1

    check()


def test_register_op_takes_a_declaration_or_a_class_and_rejects_a_second_declaration():
    load_builtin_ops()
    decl = OpDecl(name="softmax", signature="", inputs=(Tensor("x", "M, N"),), output="M, N",
                  reference=lambda x: x, value_kinds=("normal",))
    with pytest.raises(RegistryError, match="registered twice"):
        register_op(decl)
    assert REGISTRY.op("softmax").decl.reference is not decl.reference
    from harness.ops.derive import DeclaredOp

    for tuned in ("fused_linear_cross_entropy", "attention"):  # their own floor and draws, as declaration hooks
        op = REGISTRY.op(tuned)
        assert type(op) is DeclaredOp and op.decl.floor is not None and op.decl.make_inputs is not None, tuned
    from harness.registry.opspec import OpSpec

    class Bare(OpSpec):  # no declaration: no error model but the dtype table, refused
        name = "bare"

    with pytest.raises(RegistryError, match="OpDecl, or a subclass of harness.ops.derive.DeclaredOp"):
        register_op(Bare)
    with pytest.raises(RegistryError, match="got int"):
        register_op(3)
    assert "bare" not in REGISTRY.ops
    with pytest.raises(RegistryError, match="appear in no input"):
        OpDecl(name="bad", signature="", inputs=(Tensor("x", "M"),), output="K", reference=lambda x: x,
               value_kinds=("normal",))


def test_tolerance_is_the_rounding_spread_tight_for_a_well_conditioned_op():
    s = spec("swiglu")
    case = Case.parse("swiglu:M=4,N=64,dtype=float16,layout=contiguous,values=normal,seed=3")
    inputs = s.make_inputs(case, "cpu")
    expected = s.oracle(inputs)
    tol = s.tolerance("forward", case, torch.float16)
    y = expected["forward"]
    allowed = tol.atol + tol.rtol * y.abs() + tol.terms_rtol * expected["forward_magnitude"]
    # a few fp16 roundings of the result, never the table's blanket 3e-3 + 3e-3 |y|
    assert (allowed <= 12 * 2.0**-11 * y.abs() + 1e-7).all()
    assert (allowed >= 2.0**-10 * y.abs()).all()


def test_an_overflow_to_inf_passes_only_where_the_allowed_error_reaches_the_dtype_max():
    expected = torch.tensor([65088.0, 1.0], dtype=torch.float16)
    actual = torch.tensor([float("inf"), 1.0], dtype=torch.float16)
    assert compare(actual, expected, atol=0.0, rtol=0.0, magnitude=torch.tensor([1e3, 0.0]), terms_rtol=1.0).passed
    assert not compare(actual, expected, atol=0.0, rtol=0.0, magnitude=torch.tensor([10.0, 0.0]), terms_rtol=1.0).passed
    assert not compare(-actual, expected, atol=0.0, rtol=0.0, magnitude=torch.tensor([1e3, 0.0]), terms_rtol=1.0).passed


@pytest.mark.parametrize("n", [2, 3, 17, 64])
def test_some_ignored_targets_include_the_last_row_and_keep_one(n):
    """ignored=some: at least one row ignored, the last row among them (a kernel that reads a
    wrong column for ignored rows reads past the tensor only there), and not every row."""
    for seed in range(20):
        t = derive.classes((n,), 7, -100, "some", torch.Generator().manual_seed(seed))
        ignored = t == -100
        assert bool(ignored[-1]) and not bool(ignored.all()), (seed, t.tolist())
        assert ((t[~ignored] >= 0) & (t[~ignored] < 7)).all()
    for kind, expect in (("none", 0), ("all", n)):
        assert int((derive.classes((n,), 7, -100, kind, torch.Generator().manual_seed(0)) == -100).sum()) == expect


# --- max-shifted rounding and -inf entries ---------------------------------------------------

def test_a_masked_row_must_come_out_uniform_under_the_max_shifted_rounding():
    """softmax declares shift_by_max: its x is rounded as x - max, so a row masked with -1e9 (an
    ulp of 64 in fp32) gets the allowance of a row of zeros. Rounded as x itself, exp of +-64
    lets any distribution over the row pass, and padding with -1e9 (1/(N + pad)) did."""
    import dataclasses
    import importlib

    from harness.registry.registry import Contract, KernelEntry

    with REGISTRY.capturing():  # its kernels stay out of the registry other tests read
        sys.modules.pop("tests.fixtures.torch_wrong_ops", None)
        wrong = importlib.import_module("tests.fixtures.torch_wrong_ops")

    s = spec("softmax")
    assert s.decl.shift_by_max == ("x",)
    case = Case.parse("softmax:M=3,N=17,dtype=float32,layout=contiguous,values=masked_rows,seed=1")
    entry = KernelEntry("softmax", "pad", wrong.softmax_padding_minus_1e9, Contract(), "kernel", "project", "here")
    shifted = {r.check: r for r in run_case(s, entry, case, backend="interpreter", device="cpu").records}
    assert not shifted["forward"].passed and shifted["forward"].err_ratio > 1e4
    plain = derive.DeclaredOp(dataclasses.replace(s.decl, shift_by_max=()))
    unshifted = {r.check: r for r in run_case(plain, entry, case, backend="interpreter", device="cpu").records}
    assert unshifted["forward"].passed  # what the plain rounding allowed
    inputs = s.make_inputs(case, "cpu")
    masked = (inputs.args[0] < -1e8).all(-1)
    assert bool(masked.any())
    expected = s.oracle(inputs)
    y = expected["forward"][masked]
    assert torch.allclose(y, torch.full_like(y, 1 / 17), rtol=1e-15)  # the float64 oracle itself: uniform to its own rounding
    assert (expected["forward_magnitude"][masked] < 64 * 2.0**-24 / 17).all()  # a few fp32 roundings


def test_the_max_shifted_rounding_moves_the_difference_from_the_row_max():
    from harness.compare import rounding

    t = torch.tensor([[-1e9, -1e9, -1e9], [1.0, float("-inf"), 3.0], [float("nan"), float("-inf"), float("inf")]],
                     dtype=torch.float64)
    center = rounding.row_max_center(t)
    assert center.flatten().tolist() == [-1e9, 3.0, 0.0]
    moved = rounding.perturb(t, 2.0**-24, torch.Generator().manual_seed(0), center)
    assert moved[0].tolist() == t[0].tolist()  # a constant row is its max: nothing to round
    assert moved[1, 2] == 3.0 and moved[1, 1] == float("-inf")
    assert abs(float(moved[1, 0]) - 1.0) == pytest.approx(2.0 * 2.0**-24)
    with pytest.raises(RegistryError, match="shift_by_max"):
        OpDecl(name="bad", signature="f(x[N]) -> y[N]", inputs=(Tensor("x", "N"),), output="N",
               reference=lambda x: x, value_kinds=("normal",), shift_by_max=("y",))


def test_neg_inf_rows_keep_a_finite_value_and_labels_avoid_masked_classes():
    from harness.ops import row_kinds

    for n in (1, 2, 17, 257):
        x = row_kinds.draw("neg_inf", (9, n), torch.float32, torch.Generator().manual_seed(n))
        finite = torch.isfinite(x)
        assert finite.any(-1).all() and ((x == float("-inf")) | finite).all()
        assert int(finite[0].sum()) == 1 and bool(finite[0, -1])  # a one-hot row
        if n > 2:
            assert (x[:, 0] == float("-inf")).any()  # leading runs
    x = row_kinds.draw("neg_inf", (64, 33), torch.float32, torch.Generator().manual_seed(0))
    t = derive.classes((64,), 33, None, "none", torch.Generator().manual_seed(1))
    assert torch.isfinite(x[torch.arange(64), derive.off_masked(t, x, None)]).all()  # an index without ignore_index
    for ignore in (-100, 0):
        t = derive.classes((64,), 33, ignore, "some", torch.Generator().manual_seed(1))
        moved = derive.off_masked(t, x, ignore)
        kept = moved != ignore
        assert (moved == ignore).equal(t == ignore)  # ignored rows stay ignored, no other row becomes so
        assert torch.isfinite(x[kept.nonzero().squeeze(1), moved[kept]]).all()
    case = next(c for c in spec("cross_entropy").floor_cases(backend="interpreter")
                if c["values"] == "neg_inf" and int(c["V"]) > 2)  # one class cannot be masked
    inputs = spec("cross_entropy").make_inputs(case, "cpu")
    assert (inputs.args[0] == float("-inf")).any() and math.isfinite(float(spec("cross_entropy").oracle(inputs)["loss"]))


@pytest.mark.parametrize("op", DECLARED)
def test_the_widest_rows_meet_every_value_kind_on_a_gpu(op):
    """Multi-block paths (Liger-Kernel's cross-entropy past 32768 classes) are reached only by
    the GPU floor's widest rows: every value kind must meet them there, contiguous fp32 among
    them, and the interpreter's floor is left as it was."""
    s = spec(op)
    cuda = s.floor_cases(backend="cuda")
    for dim in s.inner:
        widest = max(int(c[dim]) for c in cuda if c.get(layouts.WIDE) is None)
        kinds = {c["values"] for c in cuda if int(c[dim]) == widest and c.get(layouts.WIDE) is None}
        assert kinds == set(s.decl.value_kinds), (dim, widest, kinds)
    assert not s.widest_row_cases([], s.decl.value_kinds, [])  # no shape: nothing to add
    assert all(int(c[d]) <= derive.MAX_INNER["interpreter"] for c in s.floor_cases(backend="interpreter") for d in s.inner)


@pytest.mark.parametrize("backend", ["interpreter", "cuda"])
def test_every_floor_shape_has_rows_none_ignored_and_some_ignored(backend):
    """ignored=some always ignores the last row (reads past the tensor for an ignored row), so a
    shape seen only with some would never show a bug in its last rows: a mean that loops over
    rows in blocks of 256 and stops a block early loses row 256 of 257 only when it counts."""
    s = spec("cross_entropy")
    seen: dict[tuple, set] = {}
    for c in s.floor_cases(backend=backend):
        if c.get(layouts.WIDE) is None and int(c["N"]) > 1:
            seen.setdefault((int(c["N"]), int(c["V"])), set()).add(c["ignored"])
    assert seen and all({"none", "some"} <= kinds for kinds in seen.values()), seen


def test_a_declarations_hooks_stand_in_for_the_derived_floor_pick_strategy_inputs_and_checks():
    # bug class: a hook declared and silently ignored (the op would run the derived floor and
    # inputs instead of its own), or a malformed hook taken until the first case calls it
    from hypothesis import strategies as st

    seen = []

    def floor(op, backend):
        return [op.picked({"M": 3, "N": 5}, torch.float32)]

    def pick(op, shape, dtype, kind=None, layout=None):
        return op.case(shape, dtype, layout or "offset", kind or "tiny", {}, None, 7)

    def make_inputs(op, case, device):
        seen.append(case.id)
        return derive.DeclaredOp(op.decl.__class__(**{**base, "name": "plain_twin"})).make_inputs(case, device)

    def validate(op, case):
        if int(case["M"]) == 2:
            raise derive.UsageError(f"--case {case.id}: M=2 is not allowed")

    base = dict(name="hooked", signature="f(x[M, N]) -> y[M, N]", inputs=(Tensor("x", "M, N"),), output="M, N",
                reference=lambda x: x * 2.0, value_kinds=("normal", "tiny"))
    op = derive.DeclaredOp(OpDecl(**base, floor=floor, pick=pick, strategy=lambda op, backend: st.just(floor(op, backend)[0]),
                                  make_inputs=make_inputs, validate=validate, dim_order=("N", "M"), layouts=("offset",)))
    (case,) = op.floor_cases(backend="interpreter")
    assert case.id == "hooked:M=3,N=5,dtype=float32,layout=offset,values=tiny,seed=7"
    assert op.layouts == ("offset",) and op.dims == ("N", "M") and op._key({"M": 3, "N": 5}) == "N=5,M=3"
    assert op.case_strategy(backend="interpreter").example().id == case.id
    assert op.make_inputs(case, "cpu").args[0].shape == (3, 5) and seen == [case.id]
    with pytest.raises(derive.UsageError, match="M=2 is not allowed"):
        op.validate_case(Case.parse("hooked:M=2,N=5,dtype=float32,layout=offset,values=tiny,seed=7"))
    op.validate_case(case)
    plain = derive.DeclaredOp(OpDecl(**base))
    assert plain.floor_cases(backend="interpreter")[0].id != case.id and plain.dims == ("M", "N")
    with pytest.raises(RegistryError, match="floor must be a function of the op"):
        OpDecl(**base, floor=[case])
    with pytest.raises(RegistryError, match="dim_order"):
        OpDecl(**base, dim_order=("M",))
