"""A case whose own inputs or oracle find the GPU full (other processes hold it) is the judge's
problem, not the kernel's: the case is inconclusive and the kernel "not verified", never failed
and never passed on it."""

import torch

from harness.registry.registry import REGISTRY
from harness.run import suite
from reports import verify_report


def _suite_with(monkeypatch, ooms: int):
    """The rmsnorm project kernel on one explicit case, the judge's first ``ooms`` attempts out of memory."""
    spec, entry = REGISTRY.op("rmsnorm"), REGISTRY.get("rmsnorm", "triton_rmsnorm")
    case = spec.floor_cases(backend="interpreter")[0]
    real, calls, pauses = suite.run_case, [], []

    def run_case(*args, **kwargs):
        calls.append(1)
        if len(calls) <= ooms:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return real(*args, **kwargs)

    monkeypatch.setattr(suite, "run_case", run_case)
    monkeypatch.setattr(suite.time, "sleep", lambda seconds: pauses.append(seconds))
    records = suite.run_suite(spec, entry, suite.SuitePlan(backend="interpreter", seed=0, max_examples=0, only_case=case),
                              device="cpu")
    assert pauses == [suite.OUT_OF_MEMORY_PAUSE] * min(ooms, 1)  # one pause, before the second attempt
    return spec, entry, case, records, len(calls)


def test_twice_out_of_memory_makes_the_case_inconclusive_and_the_kernel_not_verified(monkeypatch):
    spec, entry, case, records, calls = _suite_with(monkeypatch, ooms=2)
    assert calls == 2
    assert [r.check for r in records] == ["out_of_memory"]
    rec = records[0]
    assert rec.case_id == case.id and rec.inconclusive and "--case " + case.id in rec.repro
    summary = verify_report.kernel_summary("rmsnorm", entry.name, [r.to_dict() for r in records],
                                           value_checks=(spec.forward_check, *spec.grad_checks))
    assert summary["verdict"] == "not verified" and not summary["passed"]
    assert summary["failure_class"] is None and summary["failed"] == 0
    assert "out of GPU memory" in summary["unverified_reason"] and case.id in summary["unverified_reason"]
    assert summary["checks"] == {"out_of_memory": {"passed": 0, "failed": 0, "inconclusive": 1}}
    assert verify_report.verdict_label(summary) == "NOT VERIFIED"


def test_inconclusive_case_beside_a_failure_keeps_the_failure(monkeypatch):
    spec, entry, case, records, _ = _suite_with(monkeypatch, ooms=2)
    failed = dict(records[0].to_dict(), check="forward", passed=False, inconclusive=None, case_id=case.id + "x")
    summary = verify_report.kernel_summary("rmsnorm", entry.name, [records[0].to_dict(), failed],
                                           value_checks=(spec.forward_check, *spec.grad_checks))
    assert summary["verdict"] == "fail" and summary["unverified_reason"] is None


def test_one_out_of_memory_is_retried_and_the_case_runs(monkeypatch):
    spec, entry, case, records, calls = _suite_with(monkeypatch, ooms=1)
    assert calls == 2
    assert records and all(r.passed and not r.inconclusive for r in records)
    assert {"forward", "dx", "dgamma"} <= {r.check for r in records}


def test_a_case_that_leaves_a_large_cache_gives_it_back(monkeypatch):
    """On CUDA a worker whose allocator keeps more than KEEP_CACHED after an ordinary case gives it
    back (and asks the kernel process to), so that idle caches do not fill the device an
    index-width case needs; a small cache is kept (no synchronising empty_cache per case)."""
    from harness.run import gpu_slot, kernel_host
    from harness.ops import layouts

    case = REGISTRY.op("rmsnorm").floor_cases(backend="interpreter")[0]
    assert not layouts.is_index_width(case)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    given, hosts = [], []
    monkeypatch.setattr(kernel_host, "give_back_memory", lambda: given.append(1))
    for reserved, expect in ((gpu_slot.KEEP_CACHED + 1, 1), (gpu_slot.KEEP_CACHED, 0)):
        given.clear(), hosts.clear()
        monkeypatch.setattr(torch.cuda, "memory_reserved", lambda r=reserved: r)
        with gpu_slot.exclusive(case, "cuda", lambda: hosts.append(1)):
            pass
        assert (len(given), len(hosts)) == (expect, expect)
    with gpu_slot.exclusive(case, "interpreter", lambda: hosts.append(1)):
        pass
    assert not hosts
