"""All the cases of one kernel: the op's floor cases, then hypothesis-generated ones.

A failing generated case is shrunk by hypothesis; the records keep the first failure and the
shrunk one (phase ``shrunk``). ``stop_at_first_failure`` (the mutation campaign) skips
everything after the first failed check.
"""

from __future__ import annotations

import time
from typing import Callable

from hypothesis.errors import FlakyFailure
from hypothesis import HealthCheck, Phase, given, seed as hypothesis_seed, settings

from harness.cases import Case
from harness.opspec import OpSpec
from harness.record import CaseRecord
from harness.registry import KernelEntry
from harness.runner import CaseRun, run_case

SHRINK_BUDGET_S = 60.0

Progress = Callable[[CaseRun], None]


class _Failed(AssertionError):
    pass


def run_suite(
    spec: OpSpec,
    entry: KernelEntry,
    *,
    backend: str,
    device: str,
    seed: int,
    max_examples: int,
    only_case: Case | None = None,
    stop_at_first_failure: bool = False,
    progress: Progress | None = None,
    on_start: Callable[[Case], None] | None = None,
) -> list[CaseRecord]:
    records: list[CaseRecord] = []

    def one(case: Case, phase: str) -> CaseRun:
        if on_start:
            on_start(case)
        run = run_case(spec, entry, case, backend=backend, device=device, phase=phase)
        if progress:
            progress(run)
        return run

    if only_case is not None:
        return one(only_case, "explicit").records

    for case in spec.floor_cases(backend=backend):
        run = one(case, "floor")
        records += run.records
        if stop_at_first_failure and not run.passed:
            return records

    if max_examples <= 0:
        return records
    records += _generated(spec, one, backend=backend, seed=seed, max_examples=max_examples, shrink=not stop_at_first_failure)
    return records


def _generated(spec: OpSpec, one, *, backend: str, seed: int, max_examples: int, shrink: bool) -> list[CaseRecord]:
    kept: list[CaseRecord] = []
    state = {"first_failure_at": None, "best": None}  # best: (case id, records) of the smallest failure

    def body(case: Case) -> None:
        if _fails(case):
            raise _Failed(case.id)  # one raise site: hypothesis tells failures apart by location

    def _fails(case: Case) -> bool:
        failing_since = state["first_failure_at"]
        if failing_since is None:
            run = one(case, "generated")
            kept.extend(run.records)
            if not run.passed:
                state["first_failure_at"] = time.monotonic()
                state["best"] = (case.id, run.records)
            return not run.passed
        # shrinking: hypothesis only tries candidates simpler than the best failure so far
        if case.id == state["best"][0]:
            return True
        if time.monotonic() - failing_since > SHRINK_BUDGET_S:
            return False  # out of shrink budget: report as passing so hypothesis settles on the best
        run = one(case, "shrunk")
        if not run.passed:
            state["best"] = (case.id, run.records)
        return not run.passed

    test = given(spec.case_strategy(backend=backend))(body)
    test = settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=False,
        print_blob=False,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.generate, Phase.shrink) if shrink else (Phase.generate,),
    )(test)
    test = hypothesis_seed(seed)(test)
    try:
        test()
    except (_Failed, FlakyFailure):
        pass
    best = state["best"]
    if best is not None:
        first_failed_id = next(r.case_id for r in kept if not r.passed)
        if best[0] != first_failed_id:
            kept.extend(best[1])
    return kept
