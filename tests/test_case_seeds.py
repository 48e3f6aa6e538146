"""Floor cases are named by their content: a floor case's seed is a stable hash of its other
parameters (harness.cases.case.content_seed), so a case keeps its seed and id wherever it sits
in the floor, and a floor that gains or loses cases leaves the others' ids (the kill cache's
hints, the store's keys) alone.

Bug class targeted: seeds by position (SEED_BASE + i), where one added floor size reseeded and
renamed every later case.
"""

import dataclasses

import pytest

from harness.cases.case import Case, content_seed
from harness.registry.registry import REGISTRY, load_builtin_ops
from properties.derive import DeclaredOp

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


def test_a_floor_that_gains_a_shape_keeps_every_other_case_id():
    spec = REGISTRY.op("softmax")
    extra = {"M": 5, "N": 300}
    grown = DeclaredOp(dataclasses.replace(spec.decl, floor_shapes=spec.decl.floor_shapes + (extra,)))
    before = {c.id for c in spec.floor_cases(backend="interpreter")}
    after = grown.floor_cases(backend="interpreter")
    by_content = {tuple(p for p in c.params if p[0] != "seed"): c.id for c in after}
    kept = [i for i in before if tuple(p for p in Case.parse(i).params if p[0] != "seed") in by_content]
    assert kept and all(by_content[tuple(p for p in Case.parse(i).params if p[0] != "seed")] == i for i in kept)
    assert any(int(c["M"]) == 5 and int(c["N"]) == 300 for c in after)
