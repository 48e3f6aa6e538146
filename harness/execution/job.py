"""A job of the worker pool (harness.execution.jobs), how it ended and what it reports on the way.

``JobStatus`` and ``EventKind`` are StrEnums whose values the reports hold; ``Decision`` is what
the pool's caller says about a queued job when its turn comes.
"""

from __future__ import annotations

import dataclasses

from harness.settings import DEFAULTS
from vocabulary.records import CaseRecord
from vocabulary import Decision, EventKind, JobStatus  # noqa: F401  (the pool's names, also imported from here)


@dataclasses.dataclass
class Job:
    op: str
    kernel: str
    backend: str  # resolved: a vocabulary.Backend value
    seed: int
    max_examples: int
    plugins: tuple[str, ...] = ()
    case: str | None = None
    stop_at_first_failure: bool = False
    timeout: float = DEFAULTS.job_timeout_s
    extra_modules: tuple[str, ...] = ()  # modules that register more entries (e.g. generated mutants)
    shard: int = 0  # this job runs the cases of shard ``shard`` of ``shards`` (harness.run.suite)
    shards: int = 1
    fresh: bool = False  # a worker of its own, closed after it (code the harness cannot vouch for)
    floor_first: tuple[str, ...] = ()  # floor case ids to run first (harness.run.suite; order only)
    baseline: str | None = None  # verify --baseline: the paired base entry (``base:<name>``), compared per case
    library: tuple[str, ...] = ()  # mutate --mutate-module: the library modules whose mutants the kernel process registers
    carrier: str = "*"  # mutate --carrier: the plugin kernels that run the library's mutants
    fresh_kernel: bool = False  # a kernel process of its own (a library mutant: nothing compiled before its swap)
    known_passed: tuple[str, ...] = ()  # case ids a current verify verdict passed: not run again (harness.run.suite)
    known_seconds: float = 0.0  # what those cases took in verify (the sanity step's clean run: mutants' limits)
    id: str = ""  # a stable name for the caller (the campaign: ``sanity:<op>:<kernel>``, ``mutant:<op>/<name>``); unique in a run

    @property
    def label(self) -> str:
        part = f" [{self.shard + 1}/{self.shards}]" if self.shards > 1 else ""
        return f"{self.op}/{self.kernel}{part}"


@dataclasses.dataclass
class JobResult:
    job: Job
    status: JobStatus
    records: list[CaseRecord]
    cases_run: int
    seconds: float
    log_tail: str = ""
    pid: int = 0  # the worker process that ran it (a healthy worker runs many jobs)
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES of that worker (None: not on CUDA)
    current: str | None = None  # interrupted: the case the job was running
    incompetent: str | None = None  # the judge's word that the job's mutant does not compile (harness.mutation.mutagen)
    harness_error: dict | None = None  # HARNESS_ERROR: what raised, where, on which case (harness.execution.fault)

    def __post_init__(self) -> None:
        self.status = JobStatus(self.status)

    @property
    def passed(self) -> bool:
        return self.status is JobStatus.OK and all(r.passed for r in self.records)


@dataclasses.dataclass
class Event:
    job: Job
    kind: EventKind
    cases_run: int
    failed: int  # distinct failed cases (harness.execution.jobs.failed_cases)
    current: str | None
    result: JobResult | None = None  # DONE: how the job ended, as run_jobs will return it

    def __post_init__(self) -> None:
        self.kind = EventKind(self.kind)
