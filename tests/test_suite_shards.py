"""harness.run.suite sharding: k shards run exactly the cases of one unsharded run, each once."""

import pytest

from harness.registry.registry import REGISTRY
from harness.run.suite import run_suite


def case_ids(backend, device, shard, max_examples=6):
    spec, entry = REGISTRY.op("rmsnorm"), REGISTRY.get("rmsnorm", "triton_rmsnorm")
    records = run_suite(spec, entry, backend=backend.name, device=device, seed=3, max_examples=max_examples, shard=shard)
    return [r.case_id for r in records if r.check == "forward"]


@pytest.mark.slow
def test_shards_partition_the_unsharded_case_set(backend, device):
    whole = case_ids(backend, device, (0, 1))
    parts = [case_ids(backend, device, (i, 3)) for i in range(3)]
    assert all(parts), "every shard got some cases"
    flat = [c for part in parts for c in part]
    assert sorted(flat) == sorted(whole)  # same cases, none twice, none lost


def test_a_shard_outside_the_count_is_refused(backend, device):
    with pytest.raises(ValueError, match="shard 3 of 3"):
        case_ids(backend, device, (3, 3))


def test_floor_first_changes_the_order_only(backend, device):
    from harness.registry.registry import REGISTRY

    spec, entry = REGISTRY.op("rmsnorm"), REGISTRY.get("rmsnorm", "triton_rmsnorm")
    floor = [c.id for c in spec.floor_cases(backend=backend.name)]
    wanted = [floor[7], "rmsnorm:not-a-floor-case", floor[3]]
    seen = []
    run_suite(spec, entry, backend=backend.name, device=device, seed=0, max_examples=0, floor_first=wanted,
              on_start=lambda case: seen.append(case.id))
    assert seen[:2] == [floor[7], floor[3]]  # the hints first, unknown ids ignored
    assert sorted(seen) == sorted(floor)  # the same cases, each once
