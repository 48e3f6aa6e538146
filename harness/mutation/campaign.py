"""A mutation campaign: sanity first, then every selected mutant in a worker process, then a score.

Order (as mutmut does): the unmutated kernels must pass the suite and a forced failure must
fail it, else nothing is scored. Each mutant then runs the same properties as ``verify``
(``stop_at_first_failure``, no shrinking) in a worker process, with a time limit derived
from the clean run; a healthy worker runs mutant after mutant (``reuse``), a crashed, hung or
CUDA-poisoned one is replaced (harness.execution.jobs). Outcomes are one Enum; ``detected`` = killed, timeout or crashed.

    score = detected / (total - incompetent - equivalent)
"""

from __future__ import annotations

import collections
import dataclasses
import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from harness.cases.case import Case, repro_command
from harness.settings import PROJECT_ROOT
from harness.execution.jobs import Event, Job, JobResult, run_jobs
from harness.mutation.outcome import SANITY_PREFIX, Outcome, Status
from harness.registry import discovery
from harness.registry.registry import REGISTRY, KernelEntry

if TYPE_CHECKING:
    from harness.mutation.memcheck_looks import FirstLooks

EQUIVALENT_FILE = PROJECT_ROOT / discovery.MUTANTS.replace(".", "/") / "equivalent.toml"
TIMEOUT_FACTOR = 5.0
TIMEOUT_MARGIN_S = 60.0
PROVISIONAL_TIMEOUT_S = 1800.0  # a mutant's limit until its op's clean run has finished
SANITY_TIMEOUT_S = 1800.0


@dataclasses.dataclass
class Sanity:
    passed: bool
    reason: str
    clean_seconds: dict[str, float]  # op -> wall time of the slowest clean kernel run
    details: list[dict]
    timeouts: dict[str, float] = dataclasses.field(default_factory=dict)  # op -> per-mutant limit used
    interrupted: bool = False  # the campaign was stopped before every job ended
    not_run: list[str] = dataclasses.field(default_factory=list)  # mutants left unfinished by the interruption


@dataclasses.dataclass(frozen=True)
class JobSettings:
    """What every job of one campaign shares. ``library``/``carrier``: a library campaign
    (harness.mutation.library): the modules whose mutants the kernel processes register, and
    the plugin kernels that run them."""

    backend: str
    seed: int
    max_examples: int
    plugins: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    case: str | None = None
    library: tuple[str, ...] = ()
    carrier: str = "*"

    def job(self, op: str, kernel: str, *, timeout: float) -> Job:
        return Job(op=op, kernel=kernel, backend=self.backend, seed=self.seed, max_examples=self.max_examples,
                   plugins=tuple(self.plugins), case=self.case, stop_at_first_failure=True, timeout=timeout,
                   extra_modules=tuple(self.modules), library=tuple(self.library), carrier=self.carrier)


def mutant_modules() -> tuple[str, ...]:
    return tuple(discovery.modules(discovery.MUTANTS))


def load_mutants() -> tuple[str, ...]:
    """Import every mutant module (catalogs, generated, sanity); return their names."""
    return tuple(discovery.import_all(discovery.MUTANTS))


def select(op: str | None, pattern: str) -> list[KernelEntry]:
    return [e for e in REGISTRY.select(op=op, kind="mutant", pattern=pattern) if e.origin != "sanity"]


def observable_on(entry: KernelEntry, backend: str) -> bool:
    """A mutant whose meta names ``backends`` can only be detected there (a race needs a GPU:
    the interpreter runs programs one after another). Elsewhere it is left out of the campaign
    and listed apart, never counted as survived, killed or equivalent."""
    return backend in entry.meta.get("backends", (backend,))


# same_function: the mutant computes the kernel's function on every in-contract input;
# precision: it only rounds intermediates differently, and the op's error model
# (harness.compare.rounding) accepts the result on every case, as measured (``evidence``);
# out_of_reach: a real bug, but only on in-contract inputs no case can build on ``backends``
# (``needs`` says what: a workspace or output past 2**31 elements); it is not a judgement of
# equivalence: listed apart with the backend-only mutants, never scored, never counted detected
MARK_KINDS = ("same_function", "precision", "out_of_reach")


def load_equivalent(path: Path = EQUIVALENT_FILE) -> dict[str, dict]:
    """name -> {reason, fingerprint[, backends]}. A mark whose fingerprint no longer matches the
    mutant's diff is ignored (the kernel changed; the judgement must be made again); a mark with
    ``backends`` holds only there (e.g. equivalent only under the interpreter's grid)."""
    if not path.exists():
        return {}
    data = tomllib.loads(path.read_text())
    out = {}
    for item in data.get("equivalent", []):
        if not item.get("reason", "").strip():
            raise ValueError(f"{path}: equivalent mutant {item.get('name')!r} has no reason; write why it computes the same function")
        kind = item.get("kind", "same_function")
        if kind not in MARK_KINDS:
            raise ValueError(f"{path}: mark {item.get('name')!r} has kind {kind!r}; choose from {', '.join(MARK_KINDS)}")
        if kind == "precision" and not (item.get("evidence", "").strip() and item.get("backends")):
            raise ValueError(f"{path}: precision mark {item.get('name')!r} needs its evidence (the measured worst "
                             "fraction of the allowed error on every case) and the backends it was measured on")
        if kind == "out_of_reach" and not (item.get("needs", "").strip() and item.get("backends")):
            raise ValueError(f"{path}: out_of_reach mark {item.get('name')!r} needs ``needs`` (the input a case would "
                             "have to build, and why none does) and the backends where no case can")
        out[item["name"]] = item
    return out


def _first_failure(result: JobResult) -> dict | None:
    failed = next((r for r in result.records if not r.passed), None)
    if failed is None:
        return None
    return {"check": failed.check, "case_id": failed.case_id, "repro": failed.repro, "message": (failed.message or "")[:500]}


def mutant_repro(case_id: str, job: Job) -> str:
    """The command that re-runs this mutant on this case: ``mutate`` (``verify`` never runs
    mutants), with the library options of a library campaign."""
    options = [word for module in job.library for word in ("--mutate-module", module)]
    if job.library and job.carrier != "*":
        options += ["--carrier", job.carrier]
    return repro_command(Case.parse(case_id), kernel=job.kernel, backend=job.backend, plugins=job.plugins,
                         command="mutate", options=options)


def classify(entry: KernelEntry, result: JobResult) -> Outcome:
    """A finished mutant job's Outcome; incompetence is the judge's word in the job's events."""
    outcome = _classify(entry, result)
    outcome.gpu = result.gpu
    return outcome


def _classify(entry: KernelEntry, result: JobResult) -> Outcome:
    killed_by = _first_failure(result)
    if result.incompetent:
        return Outcome(entry, Status.INCOMPETENT, None, result.seconds, result.incompetent)
    if result.status == "timeout":
        return Outcome(entry, Status.TIMEOUT, killed_by, result.seconds, killed_by["message"] if killed_by else "")
    if result.status == "crashed":
        return Outcome(entry, Status.CRASHED, killed_by, result.seconds, killed_by["message"] if killed_by else "")
    if killed_by:
        if killed_by.get("repro"):
            killed_by["repro"] = mutant_repro(killed_by["case_id"], result.job)
        return Outcome(entry, Status.KILLED, killed_by, result.seconds)
    return Outcome(entry, Status.SURVIVED, None, result.seconds)


def _mark_for(entry: KernelEntry, marks: dict[str, dict], backend: str | None) -> dict | None:
    """The mark of this diff (fingerprint) that holds on ``backend`` (a mark naming backends holds only there)."""
    mark = marks.get(entry.name)
    if not mark or mark.get("fingerprint") not in (None, entry.meta.get("fingerprint")):
        return None
    return mark if backend is None or "backends" not in mark or backend in mark["backends"] else None


def is_marked(entry: KernelEntry, equivalent: dict[str, dict], backend: str | None = None) -> bool:
    """Marked equivalent (same function or precision), for this diff and this backend."""
    mark = _mark_for(entry, equivalent, backend)
    return mark is not None and mark.get("kind") != "out_of_reach"


def out_of_reach(entry: KernelEntry, marks: dict[str, dict], backend: str) -> dict | None:
    """The ``out_of_reach`` mark of this diff on ``backend``, or None: the mutant is listed apart there."""
    mark = _mark_for(entry, marks, backend)
    return mark if mark is not None and mark.get("kind") == "out_of_reach" else None


def clean_shards(parallel: int, n_ops: int) -> int:
    """The clean runs are a campaign's long pole (every case of the suite, where a mutant stops
    at its first failure): split each over up to half the worker slots, at most 4 ways."""
    return max(1, min(4, parallel // (2 * max(1, n_ops))))


def clean_kernels(ops: list[str], library: bool) -> list[KernelEntry]:
    """The unmutated kernels of the sanity step: the project's kernels of ``ops``, or in a
    library campaign the plugin kernels that carry its mutants (each has a forced failure)."""
    if library:
        forced = {e.name.removeprefix(SANITY_PREFIX) for e in REGISTRY.select(kind="mutant", pattern=SANITY_PREFIX + "*")}
        return [e for e in REGISTRY.select(kind="kernel") if e.origin == "plugin" and e.op in ops and e.name in forced]
    return [e for e in REGISTRY.select(kind="kernel") if e.origin == "project" and e.op in ops]


def sanity_jobs(ops: list[str], settings: JobSettings, *, shards: int = 1) -> tuple[list[Job], str | None]:
    """The clean run of every clean kernel of ``ops`` (split into ``shards`` jobs, which
    together run the suite's whole case set: harness.run.suite) and the forced failure of each."""
    clean = clean_kernels(ops, bool(settings.library))
    names = {SANITY_PREFIX + e.name for e in clean}
    forced = [e for e in REGISTRY.select(kind="mutant", pattern=SANITY_PREFIX + "*") if e.op in ops and e.name in names]
    missing = sorted(set(ops) - {e.op for e in clean})
    if missing:
        where = "no --plugin kernel that carries the library's mutants" if settings.library else \
            "no project kernel (kernels/<op>.py) to mutate"
        return [], f"op(s) {', '.join(missing)} have {where}"
    shards = 1 if settings.case else shards
    clean_jobs = []
    for e in clean:
        for i in range(shards):
            job = settings.job(e.op, e.name, timeout=SANITY_TIMEOUT_S)
            job.shard, job.shards = i, shards
            clean_jobs.append(job)
    return clean_jobs + [settings.job(e.op, e.name, timeout=SANITY_TIMEOUT_S) for e in forced], None


def judge_sanity(jobs: list[Job], results: list[JobResult]) -> Sanity:
    details, problems, seconds = [], [], {}
    for job, result in zip(jobs, results):
        is_forced = job.kernel.startswith(SANITY_PREFIX)
        failure = _first_failure(result)
        details.append({"op": job.op, "kernel": job.kernel, "role": "forced_failure" if is_forced else "clean",
                        "status": result.status, "passed": result.passed, "cases": result.cases_run,
                        "seconds": result.seconds, "first_failure": failure})
        problem = _sanity_problem(job, result, failure, is_forced)
        if problem:
            problems.append(problem)
        if not is_forced:
            seconds[job.op] = max(seconds.get(job.op, 0.0), result.seconds)
    if problems:
        return Sanity(False, "; ".join(problems), seconds, details)
    return Sanity(True, "clean kernels pass, forced failures fail", seconds, details)


def _sanity_problem(job: Job, result: JobResult, failure: dict | None, is_forced: bool) -> str | None:
    if result.status == "interrupted":
        return f"the {'forced failure' if is_forced else 'clean run'} {job.op}/{job.kernel} was interrupted before it ended"
    if is_forced and result.passed:
        return f"the forced failure {job.kernel} passed every case: the properties of {job.op!r} detect nothing"
    if not is_forced and not result.passed:
        where = f"{failure['check']} on {failure['case_id']}" if failure else result.status
        repro = f" (repro: {failure['repro']})" if failure and failure.get("repro") else ""
        return f"the unmutated kernel {job.op}/{job.kernel} fails its own suite: {where}{repro}; fix it (make verify) before scoring mutants"
    return None


def sanity(ops: list[str], *, backend: str, seed: int, max_examples: int, plugins, parallel: int, modules,
           case: str | None = None, on_event: Callable[[Event], None] | None = None) -> Sanity:
    """The clean kernels must pass; the forced failure of each must fail (run on their own)."""
    settings = JobSettings(backend, seed, max_examples, tuple(plugins), tuple(modules), case)
    jobs, problem = sanity_jobs(ops, settings)
    if problem:
        return Sanity(False, problem, {}, [])
    return judge_sanity(jobs, run_jobs(jobs, parallel=parallel, on_event=on_event))


class _Pool:
    """The state of one campaign's pool of jobs: which jobs are the sanity step and whether it
    has failed (then the mutants not yet started are skipped: their results would be
    discarded), the mutants' limits (lowered once their op's clean run ends, as the pool reads
    ``Job.timeout`` while it polls) and the kills of the memcheck first looks."""

    def __init__(self, checks: list[Job], mutant_jobs: list[Job], *, timeout: float | None,
                 first_looks: FirstLooks | None, on_event: Callable[[Event], None] | None):
        self.checks, self.mutant_jobs = checks, mutant_jobs
        self.sanity_ids = {id(j) for j in checks}
        self.clean_ids = {id(j) for j in checks if not j.kernel.startswith(SANITY_PREFIX)}
        self.clean_left = collections.Counter(j.op for j in checks if id(j) in self.clean_ids)
        self.fixed_timeout, self.first_looks, self.forward = timeout, first_looks, on_event
        self.sanity_failed = False  # set as soon as a clean run fails or a forced failure passes
        self.looked: dict[str, Outcome] = {}  # mutant -> the kill its first look found
        self.started = time.monotonic()

    def run(self, *, parallel: int, reuse: bool) -> list[JobResult]:
        results: list[JobResult] | None = None
        try:
            results = run_jobs(self.checks + self.mutant_jobs, parallel=parallel, on_event=self.on_event, reuse=reuse,
                               skip=self.skip)
        finally:
            if self.first_looks is not None:  # after an interruption, the sanitizer runs still going are killed
                self.first_looks.close(interrupted=results is None or any(r.status == "interrupted" for r in results))
        return results

    def skip(self, job: Job) -> bool | None:
        """True: do not run it; None: not decided yet (its first look is still running)."""
        if id(job) in self.sanity_ids:
            return False
        return True if self.sanity_failed else self._killed_by_look(job)

    def _killed_by_look(self, job: Job) -> bool | None:
        if self.first_looks is None or job.kernel not in self.first_looks:
            return False
        if not self.first_looks.done(job.kernel):
            return None
        found = self.first_looks.outcome(job.kernel)
        if found is not None:
            self.looked[job.kernel] = found
        return found is not None

    def on_event(self, event: Event) -> None:
        if event.kind == "done" and id(event.job) in self.sanity_ids:
            self._sanity_job_done(event)
        if self.forward is None:
            return
        if event.kind == "skipped":
            why = "killed by its memcheck first look" if event.job.kernel in self.looked else "the sanity step failed"
            event = dataclasses.replace(event, current=why)
        self.forward(event)

    def _sanity_job_done(self, event: Event) -> None:
        is_clean = id(event.job) in self.clean_ids
        if (event.failed > 0) == is_clean:
            self.sanity_failed = True
        if is_clean:
            self.clean_left[event.job.op] -= 1
            if not self.clean_left[event.job.op] and self.fixed_timeout is None:
                self._lower_limits(event.job.op)

    def _lower_limits(self, op: str) -> None:
        # the clean jobs start first, so the time since the start bounds their run from above
        limit = TIMEOUT_FACTOR * (time.monotonic() - self.started) + TIMEOUT_MARGIN_S
        for job in self.mutant_jobs:
            if job.op == op:
                job.timeout = limit


def run_campaign(entries: list[KernelEntry], *, backend: str, seed: int, max_examples: int, plugins, parallel: int,
                 modules, equivalent: dict[str, dict], timeout: float | None = None, case: str | None = None,
                 on_event: Callable[[Event], None] | None = None, reuse: bool = True,
                 hints: dict[str, tuple[str, ...]] | None = None,
                 first_looks: FirstLooks | None = None, ops: list[str] | None = None,
                 saved: dict[str, Outcome] | None = None,
                 saved_sanity: Sanity | None = None, library: tuple[str, ...] = (),
                 carrier: str = "*") -> tuple[Sanity, list[Outcome]]:
    """Sanity and mutants in one pool: the clean run goes first and mutants fill the other slots.

    Each mutant's limit is ``timeout`` if given, else TIMEOUT_FACTOR x its op's clean run + margin;
    until the clean run ends, mutants already running carry a provisional limit, lowered to the
    derived one as soon as the clean run finishes. If the sanity step fails, the mutants'
    results are discarded, and the mutants not yet started when it fails are not run.

    Mutants with a ``first_looks`` entry (memcheck on the case that killed them last time,
    already running beside the pool: harness.mutation.memcheck_looks) are queued last; when one's turn
    comes, a kill by its look stands for its run, else it runs the suite like any other; while
    its look is still running it waits in the queue (the pool keeps watching the running jobs).

    ``ops``: the ops whose sanity step runs (default: the entries' ops); a part of a sharded
    campaign passes every selected op, so each part runs the whole sanity step.

    ``saved``: outcomes reused from an earlier campaign (harness.incremental), not run again;
    ``saved_sanity``: a passed sanity step reused the same way (its clean runs' times set the
    mutants' limits). ``library``, ``carrier``: a library campaign (harness.mutation.library).
    """
    ops = sorted(ops if ops is not None else {e.op for e in entries})
    settings = JobSettings(backend, seed, max_examples, tuple(plugins), tuple(modules), case, tuple(library), carrier)
    checks, problem = sanity_jobs(ops, settings, shards=clean_shards(parallel, len(ops)))
    if problem:
        return Sanity(False, problem, {}, []), []
    if saved_sanity is not None:
        checks = []
    outcomes, to_run = _decided_without_running(entries, equivalent, backend, saved)
    if first_looks is not None:  # by the time the pool reaches these, their looks have mostly ended
        to_run.sort(key=lambda e: e.name in first_looks)
    mutant_jobs = [_mutant_job(e, settings, timeout or _limit(e.op, saved_sanity), hints) for e in to_run]
    pool = _Pool(checks, mutant_jobs, timeout=timeout, first_looks=first_looks, on_event=on_event)
    results = pool.run(parallel=parallel, reuse=reuse)
    not_run = _collect(to_run, results[len(checks):], pool.looked, outcomes)
    verdict = dataclasses.replace(saved_sanity) if saved_sanity is not None else judge_sanity(checks, results[: len(checks)])
    verdict.timeouts = {j.op: round(j.timeout, 1) for j in mutant_jobs}
    verdict.interrupted = any(r.status == "interrupted" for r in results)
    verdict.not_run = not_run
    if verdict.interrupted:  # keep what finished: the report shows it, unscored as a gate
        return verdict, [outcomes[e.name] for e in entries if e.name in outcomes]
    if not verdict.passed:
        return verdict, []
    return verdict, [outcomes[e.name] for e in entries]


def _decided_without_running(entries: list[KernelEntry], equivalent: dict[str, dict], backend: str,
                             saved: dict[str, Outcome] | None) -> tuple[dict[str, Outcome], list[KernelEntry]]:
    """The outcomes known before the pool starts (marked equivalent, reused), and the mutants to run."""
    outcomes: dict[str, Outcome] = {}
    to_run = []
    for e in entries:
        if is_marked(e, equivalent, backend):
            mark = equivalent[e.name]
            note = mark["reason"].strip()
            if mark.get("kind") == "precision":  # the measurement travels with the judgement
                note = f"precision (inside the op's error model): {note}; measured: {mark['evidence'].strip()}"
            outcomes[e.name] = Outcome(e, Status.EQUIVALENT, None, 0.0, note)
        elif saved and e.name in saved:
            outcomes[e.name] = saved[e.name]
        else:
            to_run.append(e)
    return outcomes, to_run


def _mutant_job(entry: KernelEntry, settings: JobSettings, timeout: float, hints: dict | None) -> Job:
    job = settings.job(entry.op, entry.name, timeout=timeout)
    # a plugin's mutant is outside code that may patch global state: it gets a worker of its
    # own; the project's mutants are copies of a module, executed apart, and share workers; a
    # library mutant is swapped into the library's modules: a kernel process of its own, so
    # that no code compiled before the swap (the clean run's) is reused
    job.fresh = entry.origin == "plugin"
    job.fresh_kernel = entry.origin == "library"
    job.floor_first = hints.get(entry.name, hints.get("*", ())) if hints else ()
    return job


def _collect(to_run: list[KernelEntry], results: list[JobResult], looked: dict[str, Outcome],
             outcomes: dict[str, Outcome]) -> list[str]:
    """Put each finished mutant's outcome in ``outcomes``; return the names left unfinished."""
    not_run = []
    for e, r in zip(to_run, results):
        if r.status == "skipped":
            if e.name in looked:
                outcomes[e.name] = looked[e.name]
        elif r.status == "interrupted":
            not_run.append(e.name)
        else:
            outcomes[e.name] = classify(e, r)
    return not_run


def _limit(op: str, saved_sanity: Sanity | None) -> float:
    """A mutant's first limit: from the reused sanity step's clean run, else provisional."""
    if saved_sanity is not None and op in saved_sanity.clean_seconds:
        return TIMEOUT_FACTOR * saved_sanity.clean_seconds[op] + TIMEOUT_MARGIN_S
    return PROVISIONAL_TIMEOUT_S


HINTS_SHARED = 3  # the cases that killed the most mutants last time, tried after a mutant's own


def floor_hints(kills: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """Per mutant, the floor cases to try first: the case that killed it last time on this
    backend, then the cases that killed the most mutants ("*": for a mutant never seen).
    Only the order of the floor changes (harness.run.suite), never the suite or the verdict: a
    campaign with hints kills the same mutants, mostly with one compiled case each."""
    counts: dict[str, int] = {}
    for case_id in kills.values():
        counts[case_id] = counts.get(case_id, 0) + 1
    shared = tuple(sorted(counts, key=lambda c: (-counts[c], c))[:HINTS_SHARED])
    hints = {name: tuple(dict.fromkeys((case_id, *shared))) for name, case_id in kills.items()}
    hints["*"] = shared
    return hints


def observed_kills(outcomes: list[Outcome]) -> dict[str, str]:
    """mutant -> the case that detected it, for the next campaign's ``floor_hints``."""
    return {o.entry.name: o.killed_by["case_id"] for o in outcomes
            if o.status.detected and o.killed_by and ":" in o.killed_by.get("case_id", "")}


def score(outcomes: list[Outcome]) -> float | None:
    """detected / (total - incompetent - equivalent); None when no mutant is scorable."""
    scorable = [o for o in outcomes if o.status not in (Status.INCOMPETENT, Status.EQUIVALENT)]
    if not scorable:
        return None
    return sum(o.status.detected for o in scorable) / len(scorable)


def kill_matrix(outcomes: list[Outcome]) -> dict[str, dict[str, str]]:
    """mutant -> {check: case id} for every detected mutant (a mutant stops at its first detection)."""
    return {o.entry.name: {o.killed_by["check"]: o.killed_by["case_id"]} for o in outcomes if o.status.detected and o.killed_by}


def minimal_cases(outcomes: list[Outcome]) -> list[dict]:
    """A small set of cases that together kill every detected mutant, largest first
    (reports.mutation_report.minimal_cases over these outcomes)."""
    from reports.mutation_report import minimal_cases as cover

    return cover([{"name": o.entry.name, "detected": o.status.detected, "killed_by": o.killed_by} for o in outcomes])
