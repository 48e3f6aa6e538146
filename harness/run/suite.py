"""All the cases of one kernel: the op's floor cases, then hypothesis-generated ones.

On the interpreter the later calls of a floor case (a second run, the refilled calls: nine kernel
calls beside the two of the value checks, four fifths of verify's time there) run on a covering
subset of the floor (``later_cover``): the first case of each dtype, layout, value kind and set of
sizes. The bugs they look for (state kept between calls, an inference path, an input read after
the caller changed it) do not hide in one case of a kind; on CUDA every floor case runs them, and
on the interpreter too under ``HARNESS_LATER_CALLS=all`` (harness.settings).

A failing generated case is shrunk by hypothesis; the records keep the first failure and the
shrunk one (phase ``shrunk``). ``stop_at_first_failure`` (the mutation campaign) skips
everything after the first failed check, and runs the floor's cheap checks before its later calls.

Sharding (``shard=(i, k)``) splits one kernel's suite over k workers without changing which
cases make up the suite: shard i runs the floor cases whose position is i mod k and the
generated cases whose id hashes to i mod k. Every shard draws the same hypothesis sequence
(same seed) and treats the others' cases as passed, so the union of the shards is the case
set of an unsharded run. A shard that finds a failure shrinks it itself.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Sequence

import torch
from hypothesis.errors import FlakyFailure
from hypothesis import given, seed as hypothesis_seed

from harness.cases.case import Case, repro_command
from harness.cases.drawing import draw_settings, op_constants_only
from harness.cases.shard import shard_of
from harness.registry.opspec import OpSpec
from harness.record import waivers
from vocabulary import Backend, Check, EntryKind, Phase
from vocabulary.records import CaseRecord
from harness.registry.registry import KernelEntry
from harness.run import gpu_slot
from harness.run.kernel_host import KernelLost, give_back_memory
from harness.run.runner import CaseRun, run_case
from harness.settings import current as current_settings

Progress = Callable[[CaseRun], None]
OUT_OF_MEMORY_PAUSE = 10.0  # seconds before a case that found the GPU full tries again (harness.run.gpu_slot)


@dataclasses.dataclass
class Inconclusive:
    """A case the judge could not run (what ``one`` gives instead of a CaseRun): one record, marked
    ``inconclusive``, that passes no gate and fails none."""

    case: Case
    record: CaseRecord
    lost: None = None
    passed: bool = True  # nothing the kernel did failed; the kernel's verdict reads the record

    @property
    def records(self) -> list[CaseRecord]:
        return [self.record]


def out_of_memory_record(entry: KernelEntry, case: Case, backend: str, phase: Phase) -> CaseRecord:
    """The record of a case whose own inputs or oracle twice found the GPU full."""
    why = ("the judge ran out of GPU memory building this case's inputs or its oracle, twice: other processes "
           "held the device. Not the kernel's doing; the case was not run. Run it again with the GPU to itself")
    return CaseRecord(
        op=entry.op, kernel=entry.name, check=str(Check.OUT_OF_MEMORY), case_id=case.id, shape=[],
        dtype=str(case.get("dtype", "")), layout=str(case.get("layout", "")), passed=True, message=why,
        repro=repro_command(case, kernel=entry.name, backend=backend,
                            plugins=(entry.plugin,) if entry.plugin else ()),
        phase=phase, inconclusive="out of GPU memory (held by other processes)")


class _Failed(AssertionError):
    pass


class _JobOver(BaseException):
    """The kernel process hung or was lost too often: no further case can run. A BaseException
    so that hypothesis lets it through instead of counting it as a failing example."""


@dataclasses.dataclass(frozen=True)
class SuitePlan:
    """Which cases one suite runs, and how far: the settings a run's jobs share (backend, seed,
    generated-case count, one case, stop at the first failure: harness.execution.run_settings)
    and the job's own (its shard, floor order, cases already passed), as one value.

    ``floor_first``: ids of floor cases to run before the rest of the floor (the campaign puts the
    cases that killed a mutant last time first). Only the order changes: ids that are not floor
    cases of this backend are ignored, so the suite and its verdict stay the same.
    ``known_passed``: case ids that a current verify verdict of this very kernel passed (the
    campaign's sanity step, harness.incremental.plan.verified_cases): they are not run again and
    leave no record; the suite's other cases run as before. ``quick``: the floor's ``quick_cover``
    only, and no generated case."""

    backend: str
    seed: int
    max_examples: int
    only_case: Case | None = None
    stop_at_first_failure: bool = False
    shard: tuple[int, int] = (0, 1)
    floor_first: Sequence[str] = ()
    cheap_first: bool = False  # a mutant's floor: the cheap checks of every case before the later calls (run_suite sets it)
    known_passed: frozenset[str] = frozenset()  # cases a current verify verdict passed: not run again
    quick: bool = False  # the floor's smallest case of each dtype and layout only (quick_cover)

    def __post_init__(self) -> None:
        index, count = self.shard
        if not 0 <= index < count:
            raise ValueError(f"shard {index} of {count} does not exist")

    def mine(self, case: Case) -> bool:
        """Whether a generated case belongs to this shard."""
        index, count = self.shard
        return count == 1 or shard_of(case.id, count) == index


def _size_class(value) -> str:
    """1, up to 64, up to 1024, more (a size's class: one element, one block, a few, many); a
    size given as a tuple of leading dims by its product."""
    try:
        n = int(value)
    except (TypeError, ValueError):
        n = 1
        for part in str(value).replace("x", " ").replace("(", " ").replace(")", " ").replace(",", " ").split():
            n *= int(part) if part.isdigit() else 1
    return "1" if n <= 1 else "<=64" if n <= 64 else "<=1024" if n <= 1024 else ">1024"


def later_cover(floor: Sequence[Case]) -> frozenset[str]:
    """The floor cases that run the later calls on the interpreter: in floor order, each case that
    brings a dtype, a layout, a value kind or a class of sizes (``_size_class`` of each upper-case
    parameter) that no case before it brought."""
    seen: set = set()
    chosen = set()
    for case in floor:
        params = dict(case.params)
        keys = {("dtype", params.get("dtype")), ("layout", params.get("layout")), ("values", params.get("values")),
                ("sizes", tuple(sorted((k, _size_class(v)) for k, v in params.items() if k[:1].isupper())))}
        if keys - seen:
            seen |= keys
            chosen.add(case.id)
    return frozenset(chosen)


def _elements(case: Case) -> int:
    """The product of a case's integer sizes (its upper-case parameters)."""
    n = 1
    for key, value in case.params:
        if key[:1].isupper() and isinstance(value, int):
            n *= max(value, 1)
    return n


def quick_cover(floor: Sequence[Case]) -> frozenset[str]:
    """The quick suite (``assert_kernel(quick=True)``): of each (dtype, layout) pair of the
    floor, its smallest case (fewest elements; the first in floor order among equals). Every
    dtype and layout the floor holds is still called once, in seconds on the interpreter; the
    sizes, value kinds and generated cases of the full suite are not."""
    smallest: dict = {}
    for case in floor:
        params = dict(case.params)
        key = (params.get("dtype"), params.get("layout"))
        if key not in smallest or _elements(case) < _elements(smallest[key]):
            smallest[key] = case
    return frozenset(case.id for case in smallest.values())


def run_suite(
    spec: OpSpec,
    entry: KernelEntry,
    plan: SuitePlan,
    *,
    device: str,
    progress: Progress | None = None,
    on_start: Callable[[Case], None] | None = None,
    host=None,
    base_host=None,
) -> list[CaseRecord]:
    """The records of ``entry`` on the cases ``plan`` chooses of ``spec``, on ``device``.
    ``host``: how the kernel is called (harness.run.kernel_host; default: in this process);
    ``base_host``: the paired base kernel of verify --baseline. A case whose kernel process hung,
    or was lost once too often, ends the suite there. ``progress``/``on_start``: called with each
    case's run, and with each case before it runs."""
    records: list[CaseRecord] = []
    backend = plan.backend
    # a mutant's floor: the cheap checks of every case first, since it stops at its first failure
    plan = dataclasses.replace(plan, cheap_first=plan.stop_at_first_failure and entry.kind is EntryKind.MUTANT)

    def one(case: Case, phase: Phase, later: bool = True) -> CaseRun | Inconclusive:
        if on_start:
            on_start(case)
        failed_attempts = 0
        for attempt in (1, 2):
            try:
                run = run_case(spec, entry, case, backend=backend, device=device, phase=phase, host=host,
                               base_host=base_host, later=later)
                break
            except torch.OutOfMemoryError:
                # the judge's own allocation (inputs, their snapshot, the oracle) did not fit beside
                # what other processes on the GPU hold: not the kernel's doing (the kernel's own
                # errors come back as its reply). Twice: the case is inconclusive, never the kernel's failure.
                failed_attempts = attempt
            # out of the except block, so the traceback's frames no longer hold the case's tensors
            release()
            give_back_memory()
            if failed_attempts == 2:
                run = Inconclusive(case, out_of_memory_record(entry, case, backend, phase))
            elif failed_attempts == 1:
                time.sleep(OUT_OF_MEMORY_PAUSE)  # the other workers end their cases and give back their caches
        if progress:
            progress(run)
        if run.lost is not None and run.lost.fatal:
            records.extend(run.records)
            raise _JobOver()
        return run

    def release() -> None:
        """After an index-width case: the kernel process gives its GPU memory back too."""
        try:
            if host is not None and hasattr(host, "release"):
                host.release()
        except KernelLost:
            pass  # the process is gone, and its memory with it; the next case starts a new one

    try:
        return _suite(spec, one, records, plan, release)
    except _JobOver:
        return records


def _suite(spec: OpSpec, one, records: list[CaseRecord], plan: SuitePlan, release: Callable[[], None]) -> list[CaseRecord]:
    index, count = plan.shard
    if plan.only_case is not None:
        if plan.only_case.id in plan.known_passed:
            return records
        with gpu_slot.exclusive(plan.only_case, plan.backend, release):
            records += one(plan.only_case, Phase.EXPLICIT).records
        return records

    whole = spec.floor_cases(backend=plan.backend)
    if plan.quick:
        chosen = quick_cover(whole)
        whole = [case for case in whole if case.id in chosen]
    every = plan.backend != Backend.INTERPRETER or current_settings().later_calls_interpreter == "all"
    cover = None if every else later_cover(whole)  # None: the later calls on every case

    def later(case_id: str) -> bool:
        return cover is None or case_id in cover

    floor = [case for position, case in enumerate(whole)
             if position % count == index and case.id not in plan.known_passed]
    if plan.floor_first:
        rank = {case_id: i for i, case_id in enumerate(plan.floor_first)}
        floor.sort(key=lambda case: rank.get(case.id, len(rank)))  # stable: the rest keep their order
    if plan.cheap_first and len(floor) > 1:
        # kill order: the value checks of every floor case first (two kernel calls a case), then the
        # floor again with the later calls (the second run, the refilled calls: six more). A mutant
        # stops at its first failure either way, so this changes which failure is found first,
        # never whether one is; the first pass's records are dropped when the second runs.
        first: list[CaseRecord] = []
        for case in floor:
            with gpu_slot.exclusive(case, plan.backend, release):
                run = one(case, Phase.FLOOR, later=False)
                first += run.records
                passed = run.passed
                del run
            if not passed:
                return records + first
        records += [r for r in first if not later(r.case_id)]  # their first pass was their whole run
        floor = [case for case in floor if later(case.id)]
    for case in floor:
        with gpu_slot.exclusive(case, plan.backend, release):  # one index-width case at a time per GPU
            run = one(case, Phase.FLOOR, later=later(case.id))
            records += run.records
            passed = run.passed
            del run  # its inputs: GBs on a GPU for an index-width case, given back before the lock is released
        if plan.stop_at_first_failure and not passed:
            return records

    if plan.max_examples > 0 and not plan.quick:
        _generated(spec, one, records, plan)
    return records


def _generated(spec: OpSpec, one, kept: list[CaseRecord], plan: SuitePlan) -> None:
    """Appends the generated cases' records to ``kept`` as they come (a _JobOver keeps them)."""
    start = len(kept)
    budget = current_settings().shrink_budget_s
    state = {"first_failure_at": None, "best": None}  # best: (case id, records) of the smallest failure

    def body(case: Case) -> None:
        if _fails(case):
            raise _Failed(case.id)  # one raise site: hypothesis tells failures apart by location

    def _fails(case: Case) -> bool:
        failing_since = state["first_failure_at"]
        if failing_since is None:
            if not plan.mine(case) or case.id in plan.known_passed:
                return False  # another shard runs it, or a current verify verdict passed it
            run = one(case, Phase.GENERATED)
            kept.extend(run.records)
            if not run.passed:
                state["first_failure_at"] = time.monotonic()
                state["best"] = (case.id, run.records)
            return not run.passed
        # shrinking: hypothesis only tries candidates simpler than the best failure so far
        if case.id == state["best"][0]:
            return True
        if time.monotonic() - failing_since > budget:
            return False  # out of shrink budget: report as passing so hypothesis settles on the best
        run = one(case, Phase.SHRUNK)
        if not run.passed:
            state["best"] = (case.id, run.records)
        return not run.passed

    shrink = not plan.stop_at_first_failure
    test = given(spec.case_strategy(backend=plan.backend))(body)
    test = draw_settings(plan.max_examples, shrink=shrink, report_multiple_bugs=False)(test)
    test = hypothesis_seed(plan.seed)(test)
    try:
        with op_constants_only():
            test()
    except (_Failed, FlakyFailure):
        pass
    finally:  # also when the job is over: the smallest failure found so far is kept
        best = state["best"]
        if best is not None:
            first_failed_id = next(r.case_id for r in kept[start:] if not r.passed)
            if best[0] != first_failed_id:
                kept.extend(best[1])
