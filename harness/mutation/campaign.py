"""A mutation campaign's rules: sanity first, then every selected mutant in a worker process, then a score.

Order (as mutmut does): the unmutated kernels must pass the suite and a forced failure must
fail it (``sanity_held``, the one sanity rule), else nothing is scored. Each mutant then runs
the same properties as ``verify`` (``stop_at_first_failure``, no shrinking) in a worker
process, with a time limit derived from the clean run; a healthy worker runs mutant after
mutant (``reuse``), a crashed, hung or CUDA-poisoned one is replaced (harness.execution.jobs).
The run itself, sanity step and mutants in one pool, is harness.mutation.session. Here: the
selection, the equivalence marks (``is_stale``, the one staleness rule), the sanity jobs and
their verdict, a finished job's Outcome (one Enum; ``detected`` = killed, timeout or crashed),
the kill cache's floor order and the score.

    score = detected / (total - incompetent - equivalent)
"""

from __future__ import annotations

import collections
import dataclasses
import math
import re
import tomllib
from pathlib import Path
from typing import Callable, Mapping

from harness.cases.case import Case, repro_command
from harness.settings import PROJECT_ROOT
from harness.execution.jobs import Event, Job, JobResult, run_jobs
from harness.execution.run_settings import RunSettings
from harness.mutation.outcome import SANITY_PREFIX, Outcome, Status
from harness.registry import discovery
from harness.registry.registry import Origin, REGISTRY, KernelEntry
from vocabulary import RUN_ENDS, EntryKind, mutation_score

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
    harness_error: bool = False  # refused because the harness's own code raised (harness.execution.fault): exit 3


def mutant_modules() -> tuple[str, ...]:
    return tuple(discovery.modules(discovery.MUTANTS))


def load_mutants() -> tuple[str, ...]:
    """Import every mutant module (catalogs, generated, sanity); return their names."""
    return tuple(discovery.import_all(discovery.MUTANTS))


def select(op: str | None, pattern: str) -> list[KernelEntry]:
    return [e for e in REGISTRY.select(op=op, kind=EntryKind.MUTANT, pattern=pattern) if e.origin is not Origin.SANITY]


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
    return {"check": failed.check, "case_id": failed.case_id, "repro": failed.repro, "message": (failed.message or "")[:500],
            "margin": kill_margin(failed)}


def kill_margin(record) -> float | str:
    """How far the killing case is past what a correct kernel may do: its error ratio (error /
    allowed: 1.5 is a kill that a tolerance 50% wider would lose), or ``"crash"``/``"timeout"``
    (how the run ended), ``"non-finite"`` (a NaN or inf where the oracle is finite, or the
    reverse), ``"exact"`` (a property with no tolerance: inputs changed, wrong meta, a refusal)."""
    if record.check in RUN_ENDS:
        return str(record.check)
    if record.err_ratio is None:
        return "exact"
    if not math.isfinite(record.err_ratio):
        return "non-finite"
    return round(float(record.err_ratio), 3)


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
    outcome.specializations = tuple(sorted({k for r in result.records for k in (r.specializations or ())}))
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


def is_stale(mark: dict, entry: KernelEntry) -> bool:
    """A mark whose fingerprint is not the mutant's diff any more: the kernel changed, the
    judgement must be made again; it is reported, never applied (a mark without one never is)."""
    return mark.get("fingerprint") not in (None, entry.meta.get("fingerprint"))


def stale_marks(marks: dict[str, dict], entries: list[KernelEntry]) -> list[str]:
    """The names of the selected mutants whose mark is stale (mutation.json ``stale_equivalent_marks``)."""
    by_name = {e.name: e for e in entries}
    return sorted(n for n, mark in marks.items() if n in by_name and is_stale(mark, by_name[n]))


def _mark_for(entry: KernelEntry, marks: dict[str, dict], backend: str | None) -> dict | None:
    """The mark of this diff (fingerprint) that holds on ``backend`` (a mark naming backends holds only there)."""
    mark = marks.get(entry.name)
    if not mark or is_stale(mark, entry):
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


def not_observable(entry: KernelEntry, marks: dict[str, dict], backend: str) -> dict:
    """A mutant listed apart (mutation.json ``not_observable_here``): detectable only on other
    backends, or marked out of the cases' reach on ``backend``."""
    item = {"name": entry.name, "backends": list(entry.meta.get("backends", ())), "description": entry.description}
    mark = out_of_reach(entry, marks, backend)
    if mark is not None:
        item["out_of_reach"] = {"needs": str(mark.get("needs", "")).strip(), "reason": str(mark.get("reason", "")).strip()}
    return item


def clean_shards(parallel: int, n_ops: int) -> int:
    """The clean runs are a campaign's long pole (every case of the suite, where a mutant stops
    at its first failure): split each over up to half the worker slots, at most 4 ways."""
    return max(1, min(4, parallel // (2 * max(1, n_ops))))


def clean_kernels(ops: list[str], library: bool) -> list[KernelEntry]:
    """The unmutated kernels of the sanity step: the project's kernels of ``ops``, or in a
    library campaign the plugin kernels that carry its mutants (each has a forced failure)."""
    if library:
        forced = {e.name.removeprefix(SANITY_PREFIX) for e in REGISTRY.select(kind=EntryKind.MUTANT, pattern=SANITY_PREFIX + "*")}
        return [e for e in REGISTRY.select(kind=EntryKind.KERNEL) if e.origin is Origin.PLUGIN and e.op in ops and e.name in forced]
    return [e for e in REGISTRY.select(kind=EntryKind.KERNEL) if e.origin is Origin.PROJECT and e.op in ops]


def sanity_jobs(ops: list[str], settings: RunSettings, *, shards: int = 1,
                verified: Mapping[str, tuple[frozenset[str], float, str]] | None = None) -> tuple[list[Job], str | None]:
    """The clean run of every clean kernel of ``ops`` (split into ``shards`` jobs, which
    together run the suite's whole case set: harness.run.suite) and the forced failure of each.
    ``verified``: per clean kernel, the cases a current verify verdict passed and what they took
    (harness.incremental.plan.verified_cases): the clean run leaves them out, and their time
    counts in the clean run's (the mutants' limits)."""
    clean = clean_kernels(ops, bool(settings.library))
    names = {SANITY_PREFIX + e.name for e in clean}
    forced = [e for e in REGISTRY.select(kind=EntryKind.MUTANT, pattern=SANITY_PREFIX + "*") if e.op in ops and e.name in names]
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
            if verified and e.name in verified:
                known, seconds, _ = verified[e.name]
                job.known_passed, job.known_seconds = tuple(sorted(known)), seconds
            job.id = f"sanity:{e.op}:{e.name}" + (f":{i + 1}/{shards}" if shards > 1 else "")
            clean_jobs.append(job)
    forced_jobs = [settings.job(e.op, e.name, timeout=SANITY_TIMEOUT_S) for e in forced]
    for job in forced_jobs:
        job.id = f"sanity:{job.op}:{job.kernel}"
    return clean_jobs + forced_jobs, None


def is_forced(job: Job) -> bool:
    """A forced failure of the sanity step (else the clean run of an unmutated kernel)."""
    return job.kernel.startswith(SANITY_PREFIX)


def sanity_held(job: Job, failed: bool) -> bool:
    """The sanity rule, for one sanity job that ended with (``failed``) or without a failure:
    an unmutated kernel must pass its suite and a forced failure must fail it."""
    return failed == is_forced(job)


def judge_sanity(jobs: list[Job], results: list[JobResult]) -> Sanity:
    details, problems, seconds = [], [], {}
    for job, result in zip(jobs, results):
        forced = is_forced(job)
        failure = _first_failure(result)
        details.append({"op": job.op, "kernel": job.kernel, "role": "forced_failure" if forced else "clean",
                        "status": result.status, "passed": result.passed, "cases": result.cases_run,
                        "seconds": result.seconds, "first_failure": failure,
                        "passed_in_verify": len(job.known_passed), "verify_seconds": round(job.known_seconds, 3)})
        problem = _sanity_problem(job, result, failure)
        if problem:
            problems.append(problem)
        if not forced:
            seconds[job.op] = max(seconds.get(job.op, 0.0), result.seconds + job.known_seconds)
    if problems:
        return Sanity(False, "; ".join(problems), seconds, details,
                      harness_error=any(r.status == "harness_error" for r in results))
    return Sanity(True, "clean kernels pass, forced failures fail", seconds, details)


def harness_failure(job: Job, result: JobResult) -> str:
    """Why a job that the harness's own code failed gives the campaign no score."""
    fault = result.harness_error or {}
    return f"{job.op}/{job.kernel}: {fault.get('summary', 'the harness failed')}"


def _sanity_problem(job: Job, result: JobResult, failure: dict | None) -> str | None:
    if result.status == "harness_error":
        return harness_failure(job, result)
    if result.status == "interrupted":
        return f"the {'forced failure' if is_forced(job) else 'clean run'} {job.op}/{job.kernel} was interrupted before it ended"
    if sanity_held(job, failed=not result.passed):
        return None
    if is_forced(job):
        return f"the forced failure {job.kernel} passed every case: the properties of {job.op!r} detect nothing"
    where = f"{failure['check']} on {failure['case_id']}" if failure else result.status
    repro = f" (repro: {failure['repro']})" if failure and failure.get("repro") else ""
    return f"the unmutated kernel {job.op}/{job.kernel} fails its own suite: {where}{repro}; fix it (make verify) before scoring mutants"


def sanity(ops: list[str], *, backend: str, seed: int, max_examples: int, plugins, parallel: int, modules,
           case: str | None = None, on_event: Callable[[Event], None] | None = None) -> Sanity:
    """The clean kernels must pass; the forced failure of each must fail (run on their own)."""
    settings = RunSettings(backend, seed, max_examples, tuple(plugins), tuple(modules), case, stop_at_first_failure=True)
    jobs, problem = sanity_jobs(ops, settings)
    if problem:
        return Sanity(False, problem, {}, [])
    return judge_sanity(jobs, run_jobs(jobs, parallel=parallel, on_event=on_event))


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
    return mutation_score(o.status for o in outcomes)


def kill_matrix(outcomes: list[Outcome]) -> dict[str, dict[str, str]]:
    """mutant -> {check: case id} for every detected mutant (a mutant stops at its first detection)."""
    return {o.entry.name: {o.killed_by["check"]: o.killed_by["case_id"]} for o in outcomes if o.status.detected and o.killed_by}


def minimal_cases(outcomes: list[Outcome]) -> list[dict]:
    """A small set of cases that together kill every detected mutant, largest first
    (reports.mutation_report.minimal_cases over these outcomes)."""
    from reports.mutation_report import minimal_cases as cover

    return cover([{"name": o.entry.name, "detected": o.status.detected, "killed_by": o.killed_by} for o in outcomes])


def specializations(outcomes: list[Outcome]) -> dict:
    """The Triton specializations the mutants' runs compile on CUDA: a key counts once per
    (program, key) (a kernel a mutant left as it was shares the clean kernel's compiles:
    harness.run.specializations.source; the generated mutants of a module's schema share the
    schema's: harness.mutation.schema); in total and per mutated kernel. ``without_schemata``:
    the same count with each mutant built alone (each changed kernel a program of its own);
    ``shared_source``: the count if every mutant of a kernel, catalog and host ones too, shared one
    compile per key."""
    from harness.run.specializations import split

    per_kernel: dict[str, set[str]] = collections.defaultdict(set)
    alone: dict[str, set[str]] = collections.defaultdict(set)
    for o in outcomes:
        kernel = f"{o.entry.op}/{o.entry.meta.get('kernel') or o.entry.op}"
        for key in o.specializations:
            compiled, own = split(key)
            per_kernel[kernel].add(compiled)
            alone[kernel].add(own)
    every = set().union(*per_kernel.values()) if per_kernel else set()
    every_alone = set().union(*alone.values()) if alone else set()
    return {"total": len(every), "shared_source": len({_SOURCE_DIGEST.sub("(", k, count=1) for k in every_alone}),
            "per_kernel": {k: len(v) for k, v in sorted(per_kernel.items())},
            "without_schemata": {"total": len(every_alone), "per_kernel": {k: len(v) for k, v in sorted(alone.items())}}}


_SOURCE_DIGEST = re.compile(r"#[0-9a-f]+\(")  # a program's digest (a schema mutant's own: its fingerprint)
