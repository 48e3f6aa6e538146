"""A declared op's dims read from a call (harness.ops.derive): the symbolic dims' sizes, the
scalar arguments by name, each output's axes, shape and dtype. Functions of the op
(harness.ops.derive.op.DeclaredOp), bound as its methods."""

from __future__ import annotations

from typing import Any

from harness.registry.declare import Scalar, Tensor
from harness.registry.opspec import Meta, OpInputs
from harness.ops import leading


def sizes(op, inputs: OpInputs) -> dict[str, int]:
    """The symbolic dims' values, read from the inputs' shapes."""
    sizes = {}
    for inp, arg in zip(op.decl.inputs, inputs.args):
        if not isinstance(inp, Scalar):
            sizes.update(leading.sizes_of(inp.shape, tuple(arg.shape), op.leading))
    return sizes


def forward_metas(op, inputs: OpInputs) -> list[Meta]:
    """Each output's shape and dtype (x's dtype, as the first float input's): one per output."""
    if not op.decl.outputs:
        return [op.forward_meta(inputs)]
    sizes, first = op.sizes(inputs), op.forward_meta(inputs)
    lead = first.shape[: len(first.shape) - len(op.decl.output) + 1] if op.decl.output else ()
    shapes = op.outputs_dims(sizes, op.scalar_args(inputs.args))
    return [Meta(leading.shape(dims, sizes, op.leading, lead) if op.leading and dims[:1] == (op.leading,)
                 else tuple(n for _, n in shape), first.dtype) for dims, shape in zip(op.decl.output_shapes, shapes)]


def forward_meta(op, inputs: OpInputs) -> Meta:
    sizes = op.sizes(inputs)
    first = next(a for i, a in zip(op.decl.inputs, inputs.args) if isinstance(i, Tensor) and i.is_float)
    lead = next((tuple(a.shape[: a.dim() - len(i.shape) + 1]) for i, a in zip(op.decl.inputs, inputs.args)
                 if not isinstance(i, Scalar) and i.shape[0] == op.leading and a.dim() > len(i.shape)), None)
    if lead is not None:
        return Meta(leading.shape(op.decl.output, sizes, op.leading, lead), first.dtype)
    return Meta(tuple(n for _, n in op.output_dims(sizes, op.scalar_args(inputs.args))), first.dtype)


def scalar_args(op, args) -> dict[str, Any]:
    """The scalar arguments of a call, by name (a mode that sets the output's shape)."""
    return {i.name: a for i, a in zip(op.decl.inputs, args) if isinstance(i, Scalar)}


def outputs_dims(op, sizes: dict[str, int], scalars: dict[str, Any] | None = None) -> list[list[tuple[str | None, int]]]:
    """Each output's axes, as ``output_dims`` gives the one output's."""
    if not op.decl.outputs:
        return [op.output_dims(sizes, scalars)]
    return [[(d, sizes[d]) for d in dims] for dims in op.decl.output_shapes]


def output_dims(op, sizes: dict[str, int], scalars: dict[str, Any] | None = None) -> list[tuple[str | None, int]]:
    """The output's axes: (the dim it is, None for a fixed one; its size), given the call's
    scalars (``scalars``: a declared op's output shape does not depend on them)."""
    return [(d, sizes[d]) for d in op.decl.output]
