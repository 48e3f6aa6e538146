"""Cases beyond the example: each varying dim of an op declared from a reference at four times its
example's size, the other varying dims small.

A generated candidate can be right only up to the size it was shown (a loop over the first 1024
rows, a grid sized from the example, a constant copied from ``get_inputs()``). The floor's sizes stop
at the backend's budget (320 rows and 8191 columns on the interpreter), which a KernelBench
example (16 x 16384, 4096 x 393216) already exceeds; so no case was larger than the example, and such a
candidate passed. These cases are not shrunk to the budget: the dim keeps ``FACTOR`` x its
example's size (at least the floor's largest on a GPU, past 4096 rows and 65536 columns), the other
varying dims go down to ``COMPANION`` (or their example's size if smaller), so each costs a few
rows of the long dim. One case per varying dim, in float32, contiguous, normal values: a size
bug needs no other condition, and the floor covers the rest.
"""

from __future__ import annotations

import math

import torch

from harness.cases.case import Case

FACTOR = 4
COMPANION = 7
# on a GPU the long dim reaches at least these (rows: a dim other than the row length)
GPU_ROWS, GPU_INNER = 4097, 65537
# elements of the largest input or output past which a case is not made (float64 oracle, host memory)
LIMIT = {"interpreter": 1 << 22, "cuda": 1 << 28}


def shapes(op, backend: str) -> list[dict[str, int]]:
    """One shape per varying dim of ``op`` (a harness.ops.reference.ReferenceOp): that dim at FACTOR x
    the example's size (on CUDA at least GPU_ROWS / GPU_INNER), the others small."""
    out = []
    for dim in op.varying:
        size = FACTOR * op.example[dim]
        if backend == "cuda":
            size = max(size, GPU_INNER if dim in op.inner else GPU_ROWS)
        sizes = {d: (size if d == dim else min(op.example[d], COMPANION)) for d in op.varying}
        shape = op.complete(dict(op.example, **sizes))
        if _largest(op, shape) <= LIMIT.get(backend, LIMIT["interpreter"]) and shape not in out:
            out.append(shape)
    return out


def cases(op, backend: str) -> list[Case]:
    kind = "normal" if "normal" in op.decl.value_kinds else op.decl.value_kinds[0]
    scalars = {s.name: s.values[0] for s in op.scalars}
    return [op.case(shape, torch.float32, "contiguous", kind, scalars, "none" if op.ignorable is not None else None)
            for shape in shapes(op, backend)]


def _largest(op, shape: dict[str, int]) -> int:
    tensors = [i.shape for i in op.decl.inputs if hasattr(i, "shape") and i.shape is not None]
    sizes = [math.prod(shape[d] for d in s) for s in tensors if all(d in shape for d in s)]
    sizes.append(math.prod(n for _, n in op.output_dims(shape)))
    return max(sizes)
