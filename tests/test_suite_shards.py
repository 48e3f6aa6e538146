"""harness.run.suite sharding: k shards run exactly the cases of one unsharded run, each once."""

import pytest
import torch

from harness.registry.registry import REGISTRY, Contract, KernelEntry
from harness.run.suite import SuitePlan, run_suite


def torch_rmsnorm(x, gamma, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()).to(x.dtype)


def case_ids(backend, device, shard, max_examples=6):
    spec, entry = REGISTRY.op("rmsnorm"), REGISTRY.get("rmsnorm", "triton_rmsnorm")
    plan = SuitePlan(backend=backend.name, seed=3, max_examples=max_examples, shard=shard)
    records = run_suite(spec, entry, plan, device=device)
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
    run_suite(spec, entry, SuitePlan(backend=backend.name, seed=0, max_examples=0, floor_first=wanted), device=device,
              on_start=lambda case: seen.append(case.id))
    assert seen[:2] == [floor[7], floor[3]]  # the hints first, unknown ids ignored
    assert sorted(seen) == sorted(floor)  # the same cases, each once


def test_the_later_calls_run_on_a_cover_of_the_floor_on_the_interpreter(monkeypatch):
    """Bug classes: a cover that leaves out a dtype, a layout, a value kind or a class of sizes
    (a state or inference-path bug that shows there only); later calls run on every case anyway
    (the interpreter's gate four times slower for nothing); a case left out without its values."""
    from harness.registry.registry import REGISTRY
    from harness.run.suite import later_cover

    for op in ("rmsnorm", "softmax", "cross_entropy", "matmul", "attention"):
        floor = REGISTRY.op(op).floor_cases(backend="interpreter")
        cover = later_cover(floor)
        assert cover < {c.id for c in floor} and len(cover) <= len(floor) // 3, op
        for key in ("dtype", "layout", "values"):
            assert {c[key] for c in floor} == {c[key] for c in floor if c.id in cover}, (op, key)
    spec = REGISTRY.op("rmsnorm")
    entry = KernelEntry("rmsnorm", "torch_rms", torch_rmsnorm, Contract(), "kernel", "plugin", "here")
    floor_only = SuitePlan(backend="interpreter", seed=0, max_examples=0)
    records = run_suite(spec, entry, floor_only, device="cpu")
    floor = spec.floor_cases(backend="interpreter")
    cover = later_cover(floor)
    checks: dict[str, set] = {}
    for r in records:
        checks.setdefault(r.case_id, set()).add(r.check)
    assert set(checks) == {c.id for c in floor} and all(r.passed for r in records)  # every case, its values checked
    later = {"repeatable", "no_grad", "fresh_inputs", "changed_input"}
    assert all(later <= checks[c] for c in cover) and not any(later & checks[c] for c in set(checks) - cover)
    monkeypatch.setenv("HARNESS_LATER_CALLS", "all")  # every case, as on CUDA
    records = run_suite(spec, entry, floor_only, device="cpu")
    assert {r.case_id for r in records if r.check == "fresh_inputs"} == {c.id for c in floor}
    monkeypatch.setenv("HARNESS_LATER_CALLS", "most")
    with pytest.raises(Exception, match="HARNESS_LATER_CALLS='most': say 'cover'"):
        run_suite(spec, entry, floor_only, device="cpu")
