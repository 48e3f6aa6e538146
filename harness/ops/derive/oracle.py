"""A declared op's oracle (harness.ops.derive): the float64 reference and its gradients (float64
autograd, or the declared backward), the spread of both under the input dtype's rounding, the
allowance per check, and an ignored row's exact zero gradient. Functions of the op
(harness.ops.derive.op.DeclaredOp), bound as its methods."""

from __future__ import annotations

from typing import Any

import torch

from harness.compare import rounding
from harness.registry.opspec import OpInputs, upstreams
from harness.ops.derive.cases import ALL_IGNORED


def evaluate(op, args: list[Any], upstream, grad_wrt: tuple[int, ...]) -> list[torch.Tensor]:
    """[output(s), *gradients] of the float64 reference; ``upstream``: one tensor per output
    (a tuple where the op has several)."""
    ups = upstreams(upstream)
    if op.decl.backward is not None:
        with torch.no_grad():
            outs = op._outs(op.decl.reference(*args))
        return [*outs, *op.decl.backward(*args, *ups)]
    leaves = [a.detach().requires_grad_(p in grad_wrt) if p in grad_wrt else a for p, a in enumerate(args)]
    with torch.enable_grad():
        outs = op._outs(op.decl.reference(*leaves))
        wrt = [leaves[p] for p in grad_wrt]
        used = [(o, u) for o, u in zip(outs, ups) if o.requires_grad]
        grads = torch.autograd.grad([o for o, _ in used], wrt, grad_outputs=[u for _, u in used],
                                    allow_unused=True) if wrt and used else [None] * len(wrt)
    grads = [torch.zeros_like(w) if g is None else g for g, w in zip(grads, wrt)]
    return [*(o.detach() for o in outs), *(g.detach() for g in grads)]


def outs(op, value) -> tuple[torch.Tensor, ...]:
    """The reference's output(s) as a tuple, as many as the op declares."""
    outs = tuple(value) if op.decl.outputs else (value,)
    if len(outs) != len(op.decl.output_shapes):
        raise ValueError(f"op {op.name!r}: the reference returned {len(outs)} output(s), the declaration "
                         f"names {len(op.decl.output_shapes)}")
    return outs


def oracle(op, inputs: OpInputs) -> dict[str, torch.Tensor]:
    f64 = [a.detach().to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
           for a in inputs.args]
    floats = [p for p, a in enumerate(f64) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    ups = [u.detach().to(torch.float64) for u in upstreams(inputs.upstream)]
    upstream = tuple(ups) if op.decl.outputs else ups[0]

    def evaluate(perturbed: list[torch.Tensor]) -> list[torch.Tensor]:
        args = list(f64)
        for p, t in zip(floats, perturbed):
            args[p] = t
        rest = perturbed[len(floats):]
        return op.evaluate(args, tuple(rest) if op.decl.outputs else rest[0], inputs.grad_wrt)

    tensors = [f64[p] for p in floats] + ups
    base = evaluate(tensors)
    shifted = [op.decl.inputs[p].name in op.decl.shift_by_max for p in floats] + [False] * len(ups)
    centers = [rounding.row_max_center(t) if s else None for t, s in zip(tensors, shifted)]
    spreads = rounding.spread(evaluate, tensors, rounding.unit_roundoff(inputs.dtype), base, centers=centers)
    terms = op.terms(f64, upstream, base, inputs.grad_wrt, inputs.dtype)
    n_out = len(base) - len(inputs.grad_wrt)
    grad_of = {floats.index(p): n_out + j for j, p in enumerate(inputs.grad_wrt) if p in floats}
    for k, extra in rounding.shift_residues(evaluate, tensors, base, n_out, grad_of).items():
        terms[k] = terms[k] + extra.to(terms[k].device)
    first = op.oracle_forward_name(inputs)
    names = [first, *op.output_checks[1:], *op.grad_checks]
    expected = {}
    rounded = op.rounded(f64, upstream, len(base), inputs.dtype)
    for name, value, spread, term, n, extra in zip(names, base, spreads, terms, op.sum_lengths(inputs), rounded):
        expected[name] = value
        expected[f"{name}_magnitude"] = rounding.allowance(spread, term, n)
        if extra is not None:
            expected[f"{name}_magnitude"] = expected[f"{name}_magnitude"] + extra
        expected[f"{name}_terms"] = term  # for a kernel declaring Contract(precision="input")
    op.ignored_rows_exact(inputs, f64, expected)
    return expected


def ignored_rows(op, inputs: OpInputs) -> torch.Tensor:
    """Where the ignorable index equals the case's ignore_index (bool, the index's shape)."""
    p = op.decl.inputs.index(op.ignorable)
    q = next(k for k, i in enumerate(op.decl.inputs) if i.name == op.ignorable.ignore)
    return inputs.args[p] == inputs.args[q]


def ignored_rows_exact(op, inputs: OpInputs, f64: list[Any], expected: dict) -> None:
    """An ignored row (its index equal to ignore_index) does not reach the result, so the exact
    gradient of its elements is 0. Torch's formula, which the float64 autograd follows, gives
    0 * NaN = NaN there when the row holds a NaN or inf (p = softmax of it): both are accepted
    on such a row (``<check>_nan_ok``), and 0 is demanded on an ignored row of finite values."""
    if op.ignorable is None:
        return
    ignored = op.ignored_rows(inputs)
    if not bool(ignored.any()):
        return
    lead = len(op.ignorable.shape)
    for name, inp in zip(op.grad_checks, op.decl.differentiable):
        if tuple(inp.shape[:lead]) != tuple(op.ignorable.shape):
            continue  # not laid out by rows of the index: no row to ignore
        k = op.decl.inputs.index(inp)
        rows = ignored.reshape(ignored.shape + (1,) * (len(inp.shape) - lead)).to(expected[name].device)
        nonfinite = ~torch.isfinite(f64[k]).reshape(*ignored.shape, -1).all(-1)
        nonfinite = nonfinite.reshape(rows.shape).to(rows.device)
        expected[name] = torch.where(rows, torch.zeros_like(expected[name]), expected[name])
        for key in (f"{name}_magnitude", f"{name}_terms"):
            expected[key] = torch.where(rows, torch.zeros_like(expected[key]), expected[key])
        expected[f"{name}_nan_ok"] = (rows & nonfinite).expand_as(expected[name])


def oracle_forward_name(op, inputs: OpInputs) -> str:
    if op.ignorable is not None:
        if bool(op.ignored_rows(inputs).all()):
            return ALL_IGNORED
    return op.forward_check
