"""The apart layouts (harness.ops.apart) against kernels that read one tensor with another's strides.

Bug class targeted: a kernel or launch that indexes one tensor with the strides of another of
the same shape (``tl.load(R + row * stride_x + cols)`` in a fused add + RMSNorm, b read with a's
row stride in a SwiGLU, dy read with x's strides in a backward). Such a kernel is right whenever
the two tensors share their strides, which every layout but the apart ones gives tensors of one
shape after a wrapper's ``.contiguous()``: it passed every floor case of add_rmsnorm and swiglu.

- every pair of same-shaped tensors of a call (upstream gradients included) gets different row
  strides, storage offsets and memory orders in some floor case of every dtype, on both floors;
- op by op, each such pair read the wrong way fails the floor's apart cases while the same kernel
  reading it right passes them: Triton forward kernels for add_rmsnorm and swiglu, and for every
  op the project's kernel (or the float64 reference, for an op without one) handed one tensor
  re-viewed with the other's strides (``torch.as_strided``: what the kernel reads from that
  tensor's storage).
"""

from __future__ import annotations

import itertools

import pytest
import torch
import triton
import triton.language as tl

from harness.registry.declare import Scalar
from harness.registry.opspec import upstreams
from harness.registry.registry import REGISTRY, Contract, KernelEntry, Origin, load_builtin_ops
from harness.run.runner import run_case
from harness.ops import apart, strategies

load_builtin_ops()

OPS = sorted(name for name in REGISTRY.ops if REGISTRY.op(name).apart_layouts)
FLOOR_BACKEND = "interpreter"


def apart_cases(op: str, backend: str = FLOOR_BACKEND):
    spec = REGISTRY.op(op)
    return [c for c in spec.floor_cases(backend=backend) if apart.is_apart(str(c["layout"]))]


def call_tensors(spec, case) -> list[torch.Tensor]:
    """The tensors of one call in order: the inputs, then the upstream gradients (not a 0-dim one)."""
    inputs = spec.make_inputs(case, "cpu")
    tensors = [a for a in inputs.args if isinstance(a, torch.Tensor)]
    return tensors + [u for u in upstreams(inputs.upstream) if isinstance(u, torch.Tensor) and u.dim()]


def differences(a: torch.Tensor, b: torch.Tensor) -> set[str]:
    """What sets two tensors of one shape apart: row strides (both with a unit-stride last dim),
    storage offsets, memory orders (one with a unit-stride last dim, the other not)."""
    out = set()
    if a.storage_offset() != b.storage_offset():
        out.add("offset")
    if (a.stride(-1) == 1) != (b.stride(-1) == 1):
        out.add("order")
    elif a.dim() > 1 and a.stride(-1) == b.stride(-1) == 1 and a.stride()[:-1] != b.stride()[:-1]:
        out.add("rows")
    return out


@pytest.mark.parametrize("backend", ["interpreter", "cuda"])
def test_every_op_with_same_shaped_tensors_has_apart_layouts(backend):
    for name in sorted(REGISTRY.ops):
        spec = REGISTRY.op(name)
        dims = spec.tensor_dims
        shared = len(set(dims)) < len(dims)
        assert bool(spec.apart_layouts) == shared, name
        if shared:
            floor = spec.floor_cases(backend=backend)
            for dtype in map(strategies.dtype_name, strategies.DTYPES):
                assert {c["layout"] for c in floor if c["dtype"] == dtype} >= set(spec.apart_layouts), (name, dtype)


@pytest.mark.parametrize("backend", ["interpreter", "cuda"])
@pytest.mark.parametrize("op", OPS)
def test_every_pair_of_one_shape_differs_in_row_strides_offsets_and_orders_in_every_dtype(op, backend):
    spec = REGISTRY.op(op)
    declared = [(i, j) for i, j in itertools.combinations(range(len(spec.tensor_dims)), 2)
                if spec.tensor_dims[i] == spec.tensor_dims[j]]
    cases = apart_cases(op, backend)
    for dtype in map(strategies.dtype_name, strategies.DTYPES):
        seen: dict[tuple[int, int], set[str]] = {pair: set() for pair in declared}
        for case in (c for c in cases if c["dtype"] == dtype):
            tensors = call_tensors(spec, case)
            assert len(tensors) == len(spec.tensor_dims), case.id
            assert all(t.shape[d] >= 2 for t in tensors for d in range(t.dim())), case.id
            for i, j in itertools.combinations(range(len(tensors)), 2):
                if tensors[i].shape == tensors[j].shape:  # declared alike, or alike in this case (q and k)
                    seen.setdefault((i, j), set()).update(differences(tensors[i], tensors[j]))
        for (i, j), found in seen.items():
            rank = len(spec.tensor_dims[i])
            wanted = {"offset", "order", "rows"} if rank > 1 else {"offset", "order"}
            assert found >= wanted, (op, dtype, spec.tensor_dims[i], i, j, wanted - found)


def test_an_op_sharing_no_shape_gets_no_apart_case():
    for name in ("matmul", "cross_entropy", "fused_linear_cross_entropy"):
        spec = REGISTRY.op(name)
        assert spec.apart_layouts == ()
        assert not apart_cases(name)


def test_apart_cases_are_named_by_their_content():
    """A floor that gains a shape keeps its apart cases unless the new shape is picked (stable_least)."""
    spec = REGISTRY.op("swiglu")
    shapes = spec.floor_shapes(FLOOR_BACKEND)
    before = spec.apart_cases(shapes, torch.float16)
    grown = spec.apart_cases(shapes + [{"M": 5, "N": 300}], torch.float16)
    assert [c["layout"] for c in before] == [c["layout"] for c in grown] == list(spec.apart_layouts)
    for old, new in zip(before, grown):
        assert new.id == old.id or (new["M"], new["N"]) == (5, 300)


def test_placement_keeps_the_values():
    values = torch.arange(2 * 3 * 5, dtype=torch.float32).reshape(2, 3, 5)
    for layout in apart.layouts_for(4):
        for k in range(4):
            t = apart.place(values, layout, k, k, "cpu")
            assert torch.equal(t, values) and t.storage_offset() == k + 1
    target = torch.tensor([3, 1, 4])
    assert torch.equal(apart.place(target, apart.ORDERS, 2, 1, "cpu"), target)


# --- Triton forward kernels: one input read with the other's row stride ------------------------


@triton.jit
def _add_rmsnorm_forward(X, R, G, Y, H, N, stride_xm, stride_xn, stride_rm, stride_rn, stride_g, eps,
                         MIXUP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * stride_xm + cols * stride_xn, mask=mask, other=0.0).to(tl.float32)
    if MIXUP:  # the residual read with x's row stride
        r = tl.load(R + row * stride_xm + cols * stride_rn, mask=mask, other=0.0).to(tl.float32)
    else:
        r = tl.load(R + row * stride_rm + cols * stride_rn, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + cols * stride_g, mask=mask, other=0.0).to(tl.float32)
    h = (x + r).to(H.dtype.element_ty)
    hf = h.to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(hf * hf, axis=0) / N + eps)
    tl.store(H + row * N + cols, h, mask=mask)
    tl.store(Y + row * N + cols, (hf * rstd * g).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_forward(A, B, Y, N, stride_am, stride_an, stride_bm, stride_bn, MIXUP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    a = tl.load(A + row * stride_am + cols * stride_an, mask=mask, other=0.0).to(tl.float32)
    if MIXUP:  # b read with a's row stride
        b = tl.load(B + row * stride_am + cols * stride_bn, mask=mask, other=0.0).to(tl.float32)
    else:
        b = tl.load(B + row * stride_bm + cols * stride_bn, mask=mask, other=0.0).to(tl.float32)
    y = a * tl.sigmoid(a) * b
    tl.store(Y + row * N + cols, y.to(Y.dtype.element_ty), mask=mask)


def unit_rows(t: torch.Tensor) -> torch.Tensor:
    """The usual wrapper step: a copy only where the last dim is not unit-stride."""
    return t if t.stride(-1) == 1 else t.contiguous()


def triton_add_rmsnorm(mixup: bool):
    def add_rmsnorm(x, residual, gamma, eps):
        x, residual = unit_rows(x), unit_rows(residual)
        m, n = x.shape
        y, h = (torch.empty((m, n), dtype=x.dtype, device=x.device) for _ in range(2))
        _add_rmsnorm_forward[(m,)](x, residual, gamma, y, h, n, x.stride(0), x.stride(1), residual.stride(0),
                                   residual.stride(1), gamma.stride(0), eps, MIXUP=mixup, BLOCK=triton.next_power_of_2(n))
        return y, h

    return add_rmsnorm


def triton_swiglu(mixup: bool):
    def swiglu(a, b):
        a, b = unit_rows(a), unit_rows(b)
        m, n = a.shape
        y = torch.empty((m, n), dtype=a.dtype, device=a.device)
        _swiglu_forward[(m,)](a, b, y, n, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                              MIXUP=mixup, BLOCK=triton.next_power_of_2(n))
        return y

    return swiglu


def failures(op: str, fn, cases, contract: Contract, stop: bool = False) -> list[str]:
    """The ids of the cases (and checks) ``fn`` fails, in the interpreter on the CPU; ``stop``: at the first."""
    entry = KernelEntry(op, getattr(fn, "__name__", "kernel"), fn, contract, "kernel", Origin.PLUGIN, __file__)
    out = []
    for case in cases:
        run = run_case(REGISTRY.op(op), entry, case, backend=FLOOR_BACKEND, device="cpu")
        assert run.records, case.id
        out += [f"{case.id}: {r.check}" for r in run.records if not r.passed]
        if out and stop:
            break
    return out


SMALL = 1024  # the Triton kernels above take one row per program in one block


@pytest.mark.parametrize("op, make", [("add_rmsnorm", triton_add_rmsnorm), ("swiglu", triton_swiglu)])
def test_a_triton_kernel_reading_one_input_with_the_others_row_stride_fails_the_floor(op, make):
    cases = [c for c in apart_cases(op) if int(c["N"]) <= SMALL]
    assert {c["dtype"] for c in cases} == {strategies.dtype_name(d) for d in strategies.DTYPES}
    forward_only = Contract(forward_only=True)
    assert failures(op, make(False), cases, forward_only) == []
    assert failures(op, make(True), cases, forward_only, stop=True)


# --- every op: each same-shaped pair read the wrong way ---------------------------------------------


def restrided(t: torch.Tensor, strides: tuple[int, ...]) -> torch.Tensor:
    """``t``'s storage read with ``strides`` from ``t``'s own start: the view a kernel reads when
    it indexes ``t`` with another tensor's strides."""
    return torch.as_strided(t, t.shape, strides, t.storage_offset())


class _GradientsRead(torch.autograd.Function):
    """The outputs as they are; in the backward, upstream gradient ``reader`` read with the strides
    of ``source`` (an earlier upstream gradient's index, or fixed strides: an input's)."""

    @staticmethod
    def forward(ctx, reader, source, *outs):
        ctx.reader, ctx.source = reader, source
        return tuple(o.clone() for o in outs) if len(outs) > 1 else outs[0].clone()

    @staticmethod
    def backward(ctx, *grads):
        grads = list(grads)
        strides = grads[ctx.source].stride() if isinstance(ctx.source, int) else ctx.source
        grads[ctx.reader] = restrided(grads[ctx.reader], strides)
        return (None, None, *grads)


def reference_kernel(op: str):
    """An op without a project kernel: its float64 reference, its result in the inputs' dtype."""
    reference = REGISTRY.op(op).decl.reference

    def kernel(*args):
        dtype = next(a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
        wide = [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        out = reference(*wide)
        return tuple(o.to(dtype) for o in out) if isinstance(out, tuple) else out.to(dtype)

    kernel.__name__ = f"{op}_reference"
    return kernel


def correct_kernel(op: str):
    project = [e for e in REGISTRY.select(kind="kernel") if e.op == op and e.origin is Origin.PROJECT]
    return project[0].fn if project else reference_kernel(op)


def mixup(op: str, fn, reader: int, source: int):
    """``fn`` with the call's tensor ``reader`` read with tensor ``source``'s strides (tensors
    numbered as the call's inputs, then its upstream gradients)."""
    spec = REGISTRY.op(op)
    positions = [p for p, i in enumerate(spec.decl.inputs) if not isinstance(i, Scalar)]
    n_inputs = len(positions)

    def kernel(*args):
        args = list(args)
        if reader < n_inputs:
            args[positions[reader]] = restrided(args[positions[reader]], args[positions[source]].stride())
            return fn(*args)
        outs = fn(*args)
        outs = outs if isinstance(outs, tuple) else (outs,)
        held = source - n_inputs if source >= n_inputs else tuple(args[positions[source]].stride())
        return _GradientsRead.apply(reader - n_inputs, held, *outs)

    kernel.__name__ = f"{op}_reads_{reader}_with_{source}s_strides"
    return kernel


def pairs(op: str) -> list[tuple[int, int]]:
    dims = REGISTRY.op(op).tensor_dims
    return [(j, i) for i, j in itertools.combinations(range(len(dims)), 2) if dims[i] == dims[j]]


MIXUPS = [(op, reader, source) for op in OPS for reader, source in pairs(op)]


@pytest.mark.parametrize("op", OPS)
def test_the_correct_kernel_passes_the_apart_cases(op):
    assert failures(op, correct_kernel(op), apart_cases(op), Contract()) == []


@pytest.mark.parametrize("op, reader, source", MIXUPS, ids=[f"{o}-{r}-with-{s}" for o, r, s in MIXUPS])
def test_a_tensor_read_with_another_same_shaped_tensors_strides_fails_the_floor(op, reader, source):
    assert failures(op, mixup(op, correct_kernel(op), reader, source), apart_cases(op), Contract(), stop=True)
