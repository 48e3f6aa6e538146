"""Floor cases are named by their content: a floor case's seed is a stable hash of its other
parameters (harness.cases.case.content_seed), so a case keeps its seed and id wherever it sits
in the floor, and a floor that gains or loses cases leaves the others' ids (the kill cache's
hints, the store's keys) alone.

Bug class targeted: seeds by position (SEED_BASE + i), where one added floor size reseeded and
renamed every later case.
"""

import dataclasses

import pytest
import torch

from harness.cases.case import Case, content_seed
from harness.registry.registry import REGISTRY, load_builtin_ops
from harness.ops import strategies
from harness.ops.derive import DeclaredOp

load_builtin_ops()


@pytest.mark.parametrize("backend", ["interpreter", "cuda"])
def test_every_floor_case_is_seeded_by_its_content_and_named_once(backend):
    for name in sorted(REGISTRY.ops):
        floor = REGISTRY.op(name).floor_cases(backend=backend)
        assert floor, name
        for case in floor:
            assert case["seed"] == content_seed(case.op, case.params), case.id
        ids = [c.id for c in floor]
        assert len(ids) == len(set(ids)), name


def test_content_seed_reads_every_parameter_but_the_seed():
    params = (("M", 3), ("N", 7), ("dtype", "float16"), ("seed", 12))
    assert content_seed("rmsnorm", params) == content_seed("rmsnorm", params[:3] + (("seed", 99),))
    assert content_seed("rmsnorm", params) != content_seed("rmsnorm", (("M", 4),) + params[1:])
    assert content_seed("rmsnorm", params) != content_seed("softmax", params)
    assert 0 <= content_seed("rmsnorm", params) < 1_000_000


@pytest.mark.parametrize("op", ["softmax", "rmsnorm", "cross_entropy", "matmul"])
@pytest.mark.parametrize("backend", ["interpreter", "cuda"])
def test_a_floor_that_gains_a_shape_keeps_every_other_case(op, backend):
    """Kind, layout, scalars and ignored rows are picked by the shape's content, not its position:
    every case of the old floor is in the new one (a cover case may become unneeded, an apart case
    move to the new shape where that shape wins its pick: stable_least), with its id."""
    spec = REGISTRY.op(op)
    extra = spec.complete({d: 5 if i else 300 for i, d in enumerate(spec.free_dims)})
    grown = DeclaredOp(dataclasses.replace(spec.decl, floor_shapes=spec.decl.floor_shapes + (extra,)))
    before = spec.floor_cases(backend=backend)
    after = {c.id for c in grown.floor_cases(backend=backend)}
    covers = {c.id for dtype in strategies.DTYPES
              for c in spec.cover(spec.floor_shapes(backend) + spec.declared_shapes(backend), dtype, [])}
    moved = {(c["dtype"], c["layout"]) for c in map(Case.parse, after)
             if c["layout"] in spec.apart_layouts and all(int(c[d]) == n for d, n in extra.items())}
    lost = [c.id for c in before if c.id not in after and c.id not in covers and (c["dtype"], c["layout"]) not in moved]
    assert not lost, lost[:5]
    assert any(all(int(c[d]) == n for d, n in extra.items()) for c in map(Case.parse, after))


def test_every_kind_and_layout_is_in_the_floor_of_every_dtype():
    """What the picks leave out, cover adds: no value kind or layout of an op is missing from any dtype."""
    for name in sorted(REGISTRY.ops):
        spec = REGISTRY.op(name)
        if type(spec).floor_cases is not DeclaredOp.floor_cases:
            continue  # a floor of its own (attention, FLCE: shape tables by purpose)
        floor = spec.floor_cases(backend="interpreter")
        for dtype in map(strategies.dtype_name, strategies.DTYPES):
            mine = [c for c in floor if c["dtype"] == dtype]
            assert {c["values"] for c in mine} >= set(spec.decl.value_kinds), (name, dtype)
            assert {c["layout"] for c in mine} >= set(spec.layouts), (name, dtype)


def test_cover_adds_exactly_what_the_picks_left_out():
    spec = REGISTRY.op("softmax")
    shapes = spec.floor_shapes("interpreter")[:2]  # two shapes cannot hold 11 kinds: cover must add the rest
    picked = [spec.picked(s, torch.float16) for s in shapes]
    added = spec.cover(shapes, torch.float16, picked)
    kinds = {c["values"] for c in picked + added}
    assert kinds == set(spec.decl.value_kinds)
    assert len([c for c in added if c["values"] not in {p["values"] for p in picked}]) == len(kinds - {p["values"] for p in picked})
