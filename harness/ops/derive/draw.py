"""A declared op's hypothesis strategy (harness.ops.derive): the floor's parameters drawn from
the same ranges, a generated case's seed drawn too. A function of the op
(harness.ops.derive.op.DeclaredOp), bound as its method."""

from __future__ import annotations

from hypothesis import strategies as st

from harness.ops import strategies
from harness.ops.derive.cases import IGNORED


def case_strategy(op, *, backend: str):
    if op.decl.strategy is not None:
        return op.decl.strategy(op, backend)

    @st.composite
    def cases(draw):
        sizes = {}
        for dim in sorted(op.free_dims, key=lambda d: d not in op.inner):
            top = op.max_size(dim, backend)
            special = sorted(set(strategies.boundary_sizes(max_value=top)) | set(op.decl.special_sizes.get(dim, ())))
            sizes[dim] = draw(strategies.sizes(max_value=top, special=special))
        sizes = op.fit(sizes, backend, keep=next(iter(op.inner)))
        scalars = {s.name: draw(st.sampled_from(s.values)) for s in op.scalars}
        ignored = draw(st.sampled_from(IGNORED)) if op.ignorable is not None else None
        return op.case(
            sizes, draw(strategies.dtypes()), draw(st.sampled_from(op.layouts)),
            draw(st.sampled_from(op.decl.value_kinds)), scalars, ignored, draw(strategies.seeds()),
        )

    return cases()
