"""A declared op's inputs for a case (harness.ops.derive): each tensor drawn in the case's value
kind and placed in its layout, class ids with the case's ignored rows, the upstream gradient of
each output. ``make_inputs`` is a function of the op (harness.ops.derive.op.DeclaredOp), bound
as its method."""

from __future__ import annotations

import math
from typing import Any

import torch

from harness.cases.case import Case
from harness.registry.declare import Index, Scalar, Tensor
from harness.registry.opspec import OpInputs
from harness.ops import apart, layouts, leading, row_kinds, strategies, values


def make_inputs(op, case: Case, device: str) -> OpInputs:
    if op.decl.make_inputs is not None:
        return op.decl.make_inputs(op, case, device)
    sizes = {d: int(case[d]) for d in op.dims}
    lead = leading.parse(case) if op.leading else None
    dtype = strategies.dtype_from_name(str(case["dtype"]))
    layout, kind = str(case["layout"]), str(case["values"])
    wide = case.get(layouts.WIDE)
    gen = values.generator(int(case["seed"]))
    args: list[Any] = []
    drawn: dict[tuple[int, ...], torch.Tensor] = {}  # float inputs by shape, before placement
    k = 0  # the tensor inputs' count, for the mixed layout
    members = apart.Members()  # every tensor's place in the call, for the apart layouts
    for inp in op.decl.inputs:
        if isinstance(inp, Scalar):
            args.append(inp.from_case(case[inp.name]))
            continue
        shape = leading.shape(inp.shape, sizes, op.leading, lead)
        if isinstance(inp, Index):
            ignore = int(case[inp.ignore]) if inp.ignore else None
            t = classes(shape, sizes[inp.high], ignore, str(case.get("ignored", "none")), gen)
            logits = drawn.get(shape + (sizes[inp.high],))
            if logits is not None:
                t = off_masked(t, logits, ignore)
        elif inp.values == "kind":
            t = row_kinds.draw(own_kind(inp, kind, int(case["seed"])), shape, dtype, gen).to(dtype)
        elif inp.values == "mask":
            t = values.additive_mask(shape, dtype, gen).to(dtype)
        elif inp.values == "bool":
            t = values.bool_mask(shape, gen)
        elif inp.values == "gain":
            t = values.gains(math.prod(shape), gen).reshape(shape).to(dtype)
        else:
            t = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
        if not isinstance(inp, Index) and inp.is_float:
            drawn.setdefault(shape, t)
        args.append(place(t, layout, k, inp.name, wide, members, device))
        k += 1
    ups = []
    shapes = op.outputs_dims(sizes, op.scalar_args(args))  # as the op states them (read from a reference)
    for j, dims in enumerate(op.decl.output_shapes):  # one upstream gradient per output
        name = layouts.UPSTREAM if j == 0 else f"{layouts.UPSTREAM}_{op.decl.outputs[j][0]}"
        if lead is not None:
            out_shape = leading.shape(dims, sizes, op.leading, lead)
        else:
            out_shape = tuple(n for _, n in shapes[j])
        if out_shape:
            ups.append(place(values.upstream(out_shape, gen).to(dtype), layout, -1, name, wide, members, device))
        else:  # a scalar: random size and sign, never 1
            size = 0.5 + 3.0 * torch.rand((), generator=gen, dtype=torch.float64)
            ups.append((size * (1 if torch.rand((), generator=gen) < 0.5 else -1)).to(dtype).to(device))
    upstream = tuple(ups) if op.decl.outputs else ups[0]
    grad_wrt = tuple(p for p, i in enumerate(op.decl.inputs) if isinstance(i, Tensor) and i.differentiable)
    return OpInputs(args=tuple(args), grad_wrt=grad_wrt, upstream=upstream, dtype=dtype, layout=layout)


def place(t: torch.Tensor, layout: str, k: int, name: str, wide: str | None, members: apart.Members,
          device: str) -> torch.Tensor:
    """The k-th tensor input of a case (k = -1: an upstream gradient), named ``name``, in the
    case's ``layout``; ``members`` numbers the call's tensors for an apart layout."""
    n, j = members.next(tuple(t.shape))
    if apart.is_apart(layout):
        return apart.place(t, layout, n, j, device)
    return leading.place(t, layouts.for_input(layout, k, name, wide), device)


def own_kind(inp: Tensor, kind: str, seed: int) -> str:
    """The value kind of a float input in a case of ``kind``: the case's, unless the input has
    its own kinds (``Tensor(kinds=...)``) that lack it; then one of them, picked by the seed."""
    if not inp.kinds or kind in inp.kinds:
        return kind
    return inp.kinds[seed % len(inp.kinds)]


def classes(shape: tuple[int, ...], high: int, ignore: int | None, ignored: str, gen: torch.Generator) -> torch.Tensor:
    """Random class ids in [0, high) other than ``ignore``, class 0 and high-1 each hit when
    there is room; then none, some (at least one, the last among them, not all) or all rows set
    to ``ignore``."""
    n = math.prod(shape)
    allowed = torch.tensor([c for c in range(high) if c != ignore] or [0], dtype=torch.int64)
    t = allowed[torch.randint(len(allowed), (n,), generator=gen)]
    order = torch.randperm(n, generator=gen).tolist()
    for row, c in zip(order[: max(0, n - 1)], [c for c in (0, high - 1) if c != ignore]):
        t[row] = c
    if ignore is not None and ignored != "none":
        rows = torch.ones(n, dtype=torch.bool) if ignored == "all" else torch.rand(n, generator=gen) < 0.3
        if ignored == "some":
            rows[order[0]] = True
            if n > 1:  # the last row is ignored (a kernel's reads for an ignored row at the end of
                # the tensor, past it when the target is replaced by a wrong column), another kept
                rows[n - 1] = True
                rows[order[-1] if order[-1] != n - 1 else order[-2]] = False
        t = torch.where(rows, torch.full_like(t, ignore), t)
    return t.reshape(shape)


def off_masked(target: torch.Tensor, logits: torch.Tensor, ignore: int | None) -> torch.Tensor:
    """A class whose logit is -inf (a masked vocabulary entry) is never a label: a row whose
    target lands on one takes its first class that is neither -inf nor ``ignore`` instead (the
    loss would be +inf, which says nothing about a kernel's arithmetic). Rows without such a
    class, and ignored rows, keep theirs."""
    masked = logits == float("-inf")
    if not bool(masked.any()):
        return target
    rows = target.reshape(-1)
    flat = masked.reshape(rows.numel(), -1)
    usable = ~flat
    if ignore is not None and 0 <= ignore < flat.shape[1]:
        usable[:, ignore] = False
    hit = (rows >= 0) & (rows < flat.shape[1])  # an ignore_index outside [0, V) is never a class
    if ignore is not None:
        hit &= rows != ignore
    hit &= flat[torch.arange(rows.numel()), rows.clamp(0, flat.shape[1] - 1)]
    hit &= usable.any(1)
    first = usable.to(torch.int8).argmax(1)
    return torch.where(hit, first, rows).reshape(target.shape)
