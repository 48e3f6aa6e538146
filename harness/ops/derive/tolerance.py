"""What a declared op's tolerance allows (harness.ops.derive): per check the size of the terms
its formula sums or cancels, what an intermediate kept in the input dtype adds, the longest sum,
and the rounding model's Tolerance. Functions of the op (harness.ops.derive.op.DeclaredOp),
bound as its methods."""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch

from harness.cases.case import Case
from harness.compare import rounding
from harness.compare.tolerances import Tolerance
from harness.registry.opspec import OpInputs, upstreams


def rounded(op, f64: list[Any], upstream, count: int, dtype: torch.dtype) -> list[torch.Tensor | None]:
    """Per check, what a kernel may add by computing from an intermediate it keeps in the input
    dtype (OpDecl.rounded_terms, finite parts only) times that dtype's unit roundoff."""
    if op.decl.rounded_terms is None:
        return [None] * count
    u = rounding.unit_roundoff(dtype)
    floor = _tiny(dtype) if op.rounded_take_tiny else {}
    out = list(op.decl.rounded_terms(*f64, *upstreams(upstream), **floor))
    if len(out) != count:
        raise ValueError(f"op {op.name!r}: rounded_terms returned {len(out)} entries, one per check ({count}) "
                         "was expected")
    return [None if t is None else u * torch.where(torch.isfinite(t), t.abs(), 0.0).to(torch.float64)
            for t in out]


def terms(op, f64: list[Any], upstream, base: list[torch.Tensor], grad_wrt,
          dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
    """Per check, the size of the terms its formula sums or cancels: the declaration's, else
    |result| for each output and, for a gradient, the larger of |result| and the gradient
    for |upstream|: the upstream's signs are what make a gradient's sums cancel (the sum
    over rows of a broadcast input such as a bias, db = sum dy), and |dy| removes them."""
    ups = upstreams(upstream)
    k = len(ups)  # outputs first in ``base``, then the gradients
    declared = list(op.decl.terms(*f64, *ups, **op.terms_floor(dtype))) if op.decl.terms is not None \
        else [None] * len(base)
    if len(declared) != len(base):
        raise ValueError(f"op {op.name!r}: terms returned {len(declared)} entries, one per check ({len(base)}) "
                         "was expected")
    out = [base[j].abs() if declared[j] is None else declared[j] for j in range(k)]
    if any(t is None for t in declared[k:]):
        unsigned_up = tuple(u.abs() for u in ups)
        unsigned = op.evaluate(list(f64), unsigned_up if op.decl.outputs else unsigned_up[0], grad_wrt)[k:]
    for j, t in enumerate(declared[k:]):
        out.append(torch.maximum(base[k + j].abs(), unsigned[j].abs()) if t is None else t)
    return out


def terms_floor(op, dtype: torch.dtype) -> dict[str, float]:
    """``tiny=`` for a declared ``terms`` that takes it (OpDecl): the smallest normal of the case's dtype."""
    return _tiny(dtype) if op.terms_take_tiny else {}


def sum_lengths(op, inputs: OpInputs) -> list[int]:
    """Per check, the longest sum it involves: the declared ``reduces`` dims, and for a
    gradient also the output dims its input lacks (broadcasting sums over them)."""
    sizes = op.sizes(inputs)
    declared = max((sizes[d] for d in op.decl.reduces), default=1)
    out = [declared] * len(op.decl.output_shapes)
    for inp in op.decl.differentiable:
        missing = max(math.prod(sizes[d] for d in dims if d not in inp.shape) for dims in op.decl.output_shapes) \
            if op.decl.outputs else math.prod(
                n for d, n in op.output_dims(sizes, op.scalar_args(inputs.args)) if d not in inp.shape)
        out.append(max(declared, missing))
    return out


def tolerance(op, check: str, case: Case, dtype: torch.dtype) -> Tolerance:
    """The backward-error estimate (harness.compare.rounding): the oracle's ``_magnitude``
    is the allowance for the inputs' rounding and the fp32 arithmetic, added as is; an
    integer or bool output (argmax's indices) has none."""
    if not (dtype.is_floating_point or dtype.is_complex):
        return Tolerance(0.0, 0.0, why="an integer or bool output, compared exactly", terms_rtol=0.0)
    return Tolerance(
        rounding.output_atol(dtype), rounding.output_rtol(dtype),
        why="rounding spread of the float64 reference (harness.compare.rounding)",
        terms_rtol=1.0,
    )


def takes_tiny(fn) -> bool:
    """Whether a declared ``terms`` or ``rounded_terms`` takes the keyword ``tiny`` (OpDecl)."""
    return fn is not None and "tiny" in inspect.signature(fn).parameters


def _tiny(dtype: torch.dtype) -> dict[str, float]:
    return {"tiny": float(torch.finfo(dtype).smallest_normal)}
