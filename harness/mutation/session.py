"""One mutation campaign's run: what it runs (``CampaignPlan``) and the session that runs it.

``CampaignSession`` owns the orchestration of the pool: the sanity step's jobs (built once; the
CLI's progress count and classes read them here), the sanity rule applied as each sanity job
ends (harness.mutation.campaign.sanity_held: once it fails, the mutants not yet started are
skipped), each queued mutant's ``Decision`` (run it; skip it once the sanity step failed or its
memcheck first look killed it; let it wait while that look still runs), and the mutants' time
limits, lowered through ``Pool.set_limit`` once their op's clean run ends. Jobs are named by
stable ids: ``sanity:<op>:<kernel>`` (``:<i>/<k>`` for a clean run split over ``k`` jobs) and
``mutant:<op>/<name>``. Outcomes known before the pool starts (marked equivalent, reused from an
earlier campaign: harness.incremental) are never queued. ``CampaignReport`` writes what the
campaign found into mutation.json.
"""

from __future__ import annotations

import collections
import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from harness.execution.jobs import Decision, Event, EventKind, Job, JobResult, JobStatus, Pool
from harness.execution.run_settings import RunSettings
from harness.mutation.campaign import (
    PROVISIONAL_TIMEOUT_S, TIMEOUT_FACTOR, TIMEOUT_MARGIN_S, Sanity, classify, clean_shards, harness_failure,
    is_forced, is_marked, judge_sanity, sanity_held, sanity_jobs,
)
from harness.mutation.outcome import Outcome, Status, ident
from harness.registry.registry import Origin, KernelEntry

if TYPE_CHECKING:
    from harness.mutation.memcheck_looks import FirstLooks


@dataclasses.dataclass(frozen=True)
class CampaignPlan:
    """What one campaign runs, decided before anything runs.

    ``ops``: the ops whose sanity step runs (default: the entries' ops); a part of a sharded
    campaign passes every selected op, so each part runs the whole sanity step. ``timeout``: each
    mutant's limit; None: TIMEOUT_FACTOR x its op's clean run + margin (until the clean run ends,
    a provisional limit). ``hints``: the kill cache's floor order (campaign.floor_hints).
    ``saved``: outcomes reused from an earlier campaign, not run again; ``saved_sanity``: a passed
    sanity step reused the same way (its clean runs' times set the mutants' limits); ``verified``:
    per clean kernel, the cases a current verify verdict passed, which its clean run leaves out
    (harness.incremental.plan.verified_cases). ``library``,
    ``carrier``: a library campaign (harness.mutation.library)."""

    entries: tuple[KernelEntry, ...]
    backend: str
    seed: int
    max_examples: int
    parallel: int
    equivalent: Mapping[str, dict] = dataclasses.field(default_factory=dict)
    ops: tuple[str, ...] | None = None
    plugins: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    case: str | None = None
    timeout: float | None = None
    reuse: bool = True  # a healthy worker runs mutant after mutant (mutate --isolate: False)
    hints: Mapping[str, tuple[str, ...]] | None = None
    saved: Mapping[str, Outcome] = dataclasses.field(default_factory=dict)
    saved_sanity: Sanity | None = None
    verified: Mapping[str, tuple[frozenset[str], float, str]] = dataclasses.field(default_factory=dict)
    library: tuple[str, ...] = ()
    carrier: str = "*"

    @property
    def sanity_ops(self) -> list[str]:
        return sorted(self.ops if self.ops is not None else {e.op for e in self.entries})

    def job_settings(self) -> RunSettings:
        """What every job of the campaign shares: a job stops at its first failure (a mutant's detection)."""
        return RunSettings(self.backend, self.seed, self.max_examples, tuple(self.plugins), tuple(self.modules),
                           self.case, tuple(self.library), self.carrier, stop_at_first_failure=True)


class CampaignSession:
    """Sanity and mutants in one pool: the clean run goes first and mutants fill the other slots.

    If the sanity step fails, the mutants' results are discarded, and the mutants not yet started
    when it fails are not run. Mutants with a ``first_looks`` entry (memcheck on the case that
    killed them last time, already running beside the pool: harness.mutation.memcheck_looks) are
    queued last; when one's turn comes, a kill by its look stands for its run, else it runs the
    suite like any other; while its look is still running it waits in the queue."""

    def __init__(self, plan: CampaignPlan, *, first_looks: FirstLooks | None = None):
        self.plan, self.first_looks = plan, first_looks
        settings = plan.job_settings()
        ops = plan.sanity_ops
        checks, self.problem = sanity_jobs(ops, settings, shards=clean_shards(plan.parallel, len(ops)),
                                           verified=plan.verified)
        self.checks: list[Job] = [] if plan.saved_sanity is not None else checks
        self.sanity_ids = {j.id for j in self.checks}
        self.clean_left: dict[str, int] = {}
        for j in self.checks:
            if not is_forced(j):
                self.clean_left[j.op] = self.clean_left.get(j.op, 0) + 1
        self.outcomes, self.to_run = self._decided_without_running()
        if first_looks is not None:  # by the time the pool reaches these, their looks have mostly ended
            self.to_run.sort(key=lambda e: ident(e) in first_looks)
        self.mutant_jobs = [self._mutant_job(e, settings, plan.timeout or self._first_limit(e.op)) for e in self.to_run]
        self.sanity_failed = False  # set as soon as a clean run fails or a forced failure passes
        self.harness_errors: list[str] = []  # mutant jobs the harness's own code failed (no outcome)
        self.looked: dict[str, Outcome] = {}  # mutant -> the kill its first look found
        self.pool: Pool | None = None
        self.forward: Callable[[Event], None] | None = None

    @property
    def jobs(self) -> list[Job]:
        """The sanity step's jobs (none when reused), then the mutants'."""
        return self.checks + self.mutant_jobs

    @property
    def job_count(self) -> int:
        """The jobs the pool runs or skips: the sanity step's (none when reused) and the mutants'."""
        return len(self.checks) + len(self.to_run)

    def progress_class(self, event: Event) -> str:
        """What a finished job means for the campaign (the CI log's counts and its full lines)."""
        if event.kind == EventKind.SKIPPED:
            return "not run"
        if event.job.id in self.sanity_ids:
            return "sanity ok" if sanity_held(event.job, event.failed > 0) else "sanity failed"
        return "killed" if event.failed > 0 else "survived"

    def run(self, *, on_event: Callable[[Event], None] | None = None,
            stop: Callable[[], bool] | None = None) -> tuple[Sanity, list[Outcome]]:
        """The sanity verdict and the outcomes, in the entries' order. ``stop`` (a predicate the
        pool asks between polls) ends the run as an interruption would; so does Ctrl-C/SIGTERM.
        An interrupted run keeps what finished (``Sanity.interrupted``, ``not_run``)."""
        if self.problem:
            return Sanity(False, self.problem, {}, []), []
        self.forward = on_event
        self.pool = Pool(self.jobs, parallel=self.plan.parallel, on_event=self.on_event,
                         reuse=self.plan.reuse, decide=self.decide)
        self.started = time.monotonic()
        results: list[JobResult] | None = None
        try:
            results = self.pool.run(stop=stop)
        finally:
            if self.first_looks is not None:  # after an interruption, the sanitizer runs still going are killed
                self.first_looks.close(interrupted=results is None or any(r.status == JobStatus.INTERRUPTED
                                                                          for r in results))
        return self.result(results)

    def result(self, results: list[JobResult]) -> tuple[Sanity, list[Outcome]]:
        """The sanity verdict and the outcomes, from every job's result (in ``jobs`` order)."""
        n = len(self.checks)
        not_run = self._collect(results[n:])
        saved_sanity = self.plan.saved_sanity
        verdict = dataclasses.replace(saved_sanity) if saved_sanity is not None else judge_sanity(self.checks, results[:n])
        verdict.timeouts = {j.op: round(self.pool.limit(j.id), 1) for j in self.mutant_jobs}
        verdict.interrupted = any(r.status == JobStatus.INTERRUPTED for r in results)
        verdict.not_run = not_run
        entries = self.plan.entries
        if self.harness_errors and verdict.passed:  # no mutant's outcome stands on a run the harness broke
            verdict.passed, verdict.harness_error = False, True
            verdict.reason = (f"the harness failed on {len(self.harness_errors)} mutant job(s), so the campaign has no "
                              f"score (nothing is recorded against those mutants): " + "; ".join(self.harness_errors[:3]))
        if verdict.interrupted:  # keep what finished: the report shows it, unscored as a gate
            return verdict, [self.outcomes[ident(e)] for e in entries if ident(e) in self.outcomes]
        if not verdict.passed:
            return verdict, []
        return verdict, [self.outcomes[ident(e)] for e in entries]

    # --- what the pool asks and hears ----------------------------------------------------
    def decide(self, job: Job) -> Decision:
        if job.id in self.sanity_ids:
            return Decision.RUN
        if self.sanity_failed:
            return Decision.SKIP
        key = f"{job.op}/{job.kernel}"
        if self.first_looks is None or key not in self.first_looks:
            return Decision.RUN
        if not self.first_looks.done(key):
            return Decision.WAIT
        found = self.first_looks.outcome(key)
        if found is None:
            return Decision.RUN
        self.looked[key] = found
        return Decision.SKIP

    def on_event(self, event: Event) -> None:
        if event.kind == EventKind.DONE and event.job.id in self.sanity_ids:
            self._sanity_job_done(event)
        if self.forward is None:
            return
        if event.kind == EventKind.SKIPPED:
            why = "killed by its memcheck first look" if f"{event.job.op}/{event.job.kernel}" in self.looked else "the sanity step failed"
            event = dataclasses.replace(event, current=why)
        self.forward(event)

    def _sanity_job_done(self, event: Event) -> None:
        if not sanity_held(event.job, event.failed > 0) or (
                event.result is not None and event.result.status == JobStatus.HARNESS_ERROR):
            self.sanity_failed = True
        if not is_forced(event.job):
            self.clean_left[event.job.op] -= 1
            if not self.clean_left[event.job.op] and self.plan.timeout is None:
                # the clean jobs start first, so the time since the start bounds their run from above;
                # the cases verify passed for it, left out of the run, count with what they took there
                known = max((j.known_seconds for j in self.checks if j.op == event.job.op), default=0.0)
                limit = TIMEOUT_FACTOR * (time.monotonic() - self.started + known) + TIMEOUT_MARGIN_S
                for job in self.mutant_jobs:
                    if job.op == event.job.op:
                        self.pool.set_limit(job.id, limit)

    # --- before and after the pool -------------------------------------------------------
    def _decided_without_running(self) -> tuple[dict[str, Outcome], list[KernelEntry]]:
        """The outcomes known before the pool starts (marked equivalent, reused), and the mutants to run."""
        plan = self.plan
        outcomes: dict[str, Outcome] = {}
        to_run = []
        for e in plan.entries:
            if is_marked(e, plan.equivalent, plan.backend):
                mark = plan.equivalent[e.name]
                note = mark["reason"].strip()
                if mark.get("kind") == "precision":  # the measurement travels with the judgement
                    note = f"precision (inside the op's error model): {note}; measured: {mark['evidence'].strip()}"
                outcomes[ident(e)] = Outcome(e, Status.EQUIVALENT, None, 0.0, note)
            elif ident(e) in plan.saved:
                outcomes[ident(e)] = plan.saved[ident(e)]
            else:
                to_run.append(e)
        return outcomes, to_run

    def _first_limit(self, op: str) -> float:
        """A mutant's first limit: from the reused sanity step's clean run, else provisional."""
        saved = self.plan.saved_sanity
        if saved is not None and op in saved.clean_seconds:
            return TIMEOUT_FACTOR * saved.clean_seconds[op] + TIMEOUT_MARGIN_S
        return PROVISIONAL_TIMEOUT_S

    def _mutant_job(self, entry: KernelEntry, settings: RunSettings, timeout: float) -> Job:
        job = settings.job(entry.op, entry.name, timeout=timeout)
        job.id = f"mutant:{ident(entry)}"
        # a plugin's mutant is outside code that may patch global state: it gets a worker of its
        # own; the project's mutants are copies of a module, executed apart, and share workers; a
        # library mutant is swapped into the library's modules: a kernel process of its own, so
        # that no code compiled before the swap (the clean run's) is reused
        job.fresh = entry.origin is Origin.PLUGIN
        job.fresh_kernel = entry.origin is Origin.LIBRARY
        hints = self.plan.hints
        job.floor_first = hints.get(entry.name, hints.get("*", ())) if hints else ()
        return job

    def _collect(self, results: list[JobResult]) -> list[str]:
        """Put each finished mutant's outcome in ``outcomes``; return the names left unfinished."""
        not_run = []
        for e, r in zip(self.to_run, results):
            if r.status == JobStatus.SKIPPED:
                if ident(e) in self.looked:
                    self.outcomes[ident(e)] = self.looked[ident(e)]
            elif r.status == JobStatus.INTERRUPTED:
                not_run.append(e.name)
            elif r.status == JobStatus.HARNESS_ERROR:
                self.harness_errors.append(harness_failure(r.job, r))
            else:
                self.outcomes[ident(e)] = classify(e, r)
        return not_run


@dataclasses.dataclass
class CampaignReport:
    """mutation.json of one campaign, from what it found: scored with the outcomes, or refused
    with none; ``write`` also keeps this campaign's kills in the kill cache for the next one
    (harness.mutation.kill_cache.keep). ``tests``: harness.mutation.library_tests.Scoring, or
    None without --tests; ``library``: a library campaign (each mutant says what the tests did)."""

    header: dict
    sanity: dict
    outcomes: list[Outcome]
    started: float
    report_dir: str
    min_score: float
    backend: str
    cache: dict
    cache_path: Path | None
    hints_from: str
    library: bool = False
    tests: object = None

    def write(self, refused: str | None = None, *, scored: bool = True) -> tuple[dict, Path]:
        """The report and the path it was written to."""
        from harness.mutation import campaign, kill_cache
        from reports import mutation_report, writer

        kept = self.outcomes if scored else []
        self.header["specializations"] = campaign.specializations(self.outcomes)
        per_gpu = collections.Counter(o.gpu for o in self.outcomes if o.gpu is not None)
        if per_gpu:  # how the campaign spread over the GPUs (each worker has one)
            self.header["workers"]["mutants_per_gpu"] = dict(sorted(per_gpu.items()))
        hinted = len(self.cache.get("backends", {}).get(self.backend, {}))
        self.header["kill_cache"] = {"path": str(self.cache_path) if self.cache_path else None,
                                     "hinted": hinted, "from": self.hints_from}
        kill_cache.keep(self.cache, self.cache_path, self.backend, kept)
        report = mutation_report.build(
            self.header, mutants=[self._mutant(o) for o in kept], score=campaign.score(kept) if scored else None,
            min_score=self.min_score, sanity=self.sanity, kill_matrix=campaign.kill_matrix(kept),
            minimal_cases=campaign.minimal_cases(kept), seconds=time.monotonic() - self.started, refused=refused,
            tests=self.tests.summary() if self.tests is not None else None,
        )
        return report, writer.write_json(self.report_dir, "mutation.json", report)

    def _mutant(self, outcome: Outcome) -> dict:
        data = outcome.to_dict()
        if self.library:
            data.update(self.tests.of(outcome.entry.name) if self.tests is not None
                        else {"killed_by_tests": None, "tests_seconds": None})
        return data
