"""One verify run: the kernels it runs and how (``VerifySession``), beside the campaign's session.

``open_session`` decides, before anything runs, what the command asked for: the selected kernels
and the one ``--case``, each kernel's incremental plan (a verdict reused while nothing it depends
on changed: harness.incremental), the worker slots and each kernel's local shards, the order
(longest first, the last run's failures first) and one ``RunSettings`` every job is built from.
``VerifySession`` is then a ``harness.execution.session.Session``: its jobs, ``decide`` (under
``-x`` every job not yet started is skipped once one failed), ``on_event`` (a kernel whose every
shard ended OK is saved for the next run the moment its last shard ends) and ``result`` (each
kernel's summary and every record, from this run's jobs or its reused verdict).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path
from typing import Callable

from harness.cli import common
from harness.errors import UsageError
from harness.execution.job import Decision, Event, EventKind, Job, JobResult, JobStatus
from harness.execution.run_settings import RunSettings
from harness.settings import DEFAULTS, WATCHDOG_ENV
from vocabulary import EntryKind

__all__ = ["VerifySession", "Collected", "open_session", "select"]


def select(args: argparse.Namespace) -> tuple[list, "Case | None"]:
    """The kernels to verify and the one case of ``--case`` (or None); usage errors exit 2."""
    from harness.cases.case import Case
    from harness.registry.registry import REGISTRY, Origin

    entries = [e for e in REGISTRY.select(op=args.op, kind=EntryKind.KERNEL, pattern=args.select) if e.origin is not Origin.BASELINE]
    if common.plugin_only(args):
        # --plugin alone: the plugin's kernels, not the project's too (--select or --with-project ask for them)
        entries = [e for e in entries if e.origin is Origin.PLUGIN]
        if not entries:
            raise common.no_plugin_entries(args, "kernel", "verify")
    if not entries:
        known = ", ".join(e.name for e in REGISTRY.select(op=args.op, kind=EntryKind.KERNEL)) or "none"
        raise UsageError(f"--select {args.select!r} matches no kernel{' of op ' + args.op if args.op else ''}; registered: {known}")
    case = None
    if args.case:
        case = Case.parse(args.case)
        REGISTRY.op(case.op).validate_case(case)  # a malformed case is bad usage (exit 2), not a kernel failure
        entries = [e for e in entries if e.op == case.op]
        if not entries:
            raise UsageError(f"--case is a {case.op!r} case but no selected kernel implements {case.op!r}")
    if case is not None and args.shard is not None:
        raise UsageError("--case runs one case; it cannot be split with --shard")
    return entries, case


@dataclasses.dataclass
class Collected:
    """What a verify run found: each kernel's summary and every record, and how the run ended."""

    kernels: list[dict]
    records: list[dict]
    interrupted: bool
    results: list[JobResult]


class VerifySession:
    """The jobs of one verify run in one pool (``shards`` jobs per kernel to run), what the pool
    asks of it and hears from it, and what it collects. ``entries``/``plans``: every selected
    kernel and its incremental plan (a reused one runs no job)."""

    def __init__(self, *, entries: list, plans: list, to_run: list, settings: RunSettings, timeout: float,
                 ci_shard: tuple[int, int], shards: int, exitfirst: bool, store, baseline: dict | None,
                 failures: dict | None = None) -> None:
        self.entries, self.plans, self.shards, self.store = entries, plans, shards, store
        self.exitfirst, self.failed = exitfirst, False
        self.saved = {(e.op, e.name): (e, p) for e, p in zip(entries, plans) if not p.reused}
        self.ended: dict[tuple[str, str], list[JobResult]] = {}
        ci_part, ci_parts = ci_shard
        # CI part I of K is split again over the local shards: local shard j runs the suite's global
        # shard I + K*j of K*shards, so the K parts' local shards are every global shard once
        self._jobs = [settings.job(e.op, e.name, timeout=timeout, shard=ci_part + ci_parts * i, shards=ci_parts * shards,
                                   **_paired(baseline, e))
                      for e in to_run for i in range(shards)]
        for job in self._jobs:
            job.floor_first = (failures or {}).get(f"{job.op}/{job.kernel}", ())

    @property
    def jobs(self) -> list[Job]:
        return self._jobs

    def decide(self, job: Job) -> Decision:
        """Under -x, once a job has ended with a failed case (or not ended OK), every job not yet
        started is skipped."""
        return Decision.SKIP if self.failed else Decision.RUN

    def on_event(self, event: Event) -> None:
        if event.kind is not EventKind.DONE or event.result is None:
            return
        self._keep(event)
        if self.exitfirst:
            result = event.result
            self.failed |= result.status is not JobStatus.OK or not all(r.passed for r in result.records)

    def _keep(self, event: Event) -> None:
        """A kernel's complete run (every shard ended OK: no crash, hang or Ctrl-C) is saved for the
        next run the moment its last shard ends, so that a run stopped later (a CI limit, Ctrl-C)
        keeps the kernels that finished."""
        from harness.incremental import plan as incremental

        key = (event.job.op, event.job.kernel)
        parts = self.ended.setdefault(key, [])
        parts.append(event.result)
        if len(parts) == self.shards and all(p.status is JobStatus.OK for p in parts):
            entry, kept = self.saved[key]
            parts.sort(key=lambda p: p.job.shard)
            incremental.remember(self.store, incremental.VERIFY, f"{entry.op}/{entry.name}", kept, kernel_run(parts, self.shards))

    def run(self, *, parallel: int, on_event: Callable[[Event], None]) -> Collected:
        """Every job in a fresh process (one kernel's global side effects, a plugin that patches
        torch, can never reach another's verdict; the shards of a kernel run side by side anyway)."""
        from harness.execution.jobs import run_jobs

        results = []
        if self._jobs:
            results = run_jobs(self._jobs, parallel=parallel, reuse=False, decide=self.decide if self.exitfirst else None,
                               on_event=lambda e: (self.on_event(e), on_event(e)),
                               stop=(lambda: self.failed) if self.exitfirst else None)  # -x: the running jobs stop too
        if self.exitfirst and self.failed:
            from harness.execution import exitfirst

            results = exitfirst.settle(results)  # a kernel left unfinished is not run, never a partial PASS
        return self.result(results)

    def result(self, results: list[JobResult]) -> Collected:
        not_run = {(r.job.op, r.job.kernel) for r in results if r.status is JobStatus.SKIPPED}
        results = [r for r in results if r.status is not JobStatus.SKIPPED]
        not_run -= {(r.job.op, r.job.kernel) for r in results}  # a kernel whose other shards ran is reported
        entries, plans = self.entries, self.plans
        if not_run:
            kept = [(e, p) for e, p in zip(entries, plans) if (e.op, e.name) not in not_run]
            entries, plans = [e for e, _ in kept], [p for _, p in kept]
            print(f"verify: stopped at the first failure (-x); not run: "
                  f"{', '.join(sorted(f'{op}/{name}' for op, name in not_run))}", file=sys.stderr)
        kernels, records = _collect(entries, plans, results, self.shards)
        interrupted = any(r.status is JobStatus.INTERRUPTED for r in results)
        return Collected(kernels, records, interrupted, results)


def open_session(args: argparse.Namespace, backend, baseline: dict | None) -> tuple[VerifySession, int, int]:
    """The session of the command's run, its worker slots and the generated-case count."""
    from harness.incremental import costs
    from harness.incremental import plan as incremental
    from harness.incremental.store import Store

    entries, case = select(args)
    if case is not None:
        from harness.ops import layouts

        layouts.check_backend(case, backend.name)  # an index-width case needs a GPU (exit 2 elsewhere)
    max_examples = args.max_examples if args.max_examples is not None else DEFAULTS.max_examples(backend.name)
    # a --baseline run compares with another revision: its records carry drift a saved verdict lacks
    store = Store(args.report_dir, reuse=not args.no_cache and not args.baseline)
    plans = incremental.verify_plans(entries, store, backend=backend.name, settings={
        "seed": args.seed, "max_examples": max_examples, "case": case.id if case else None,
        "shard": list(args.shard or (0, 1)), "plugins": sorted(args.plugin), "timeout": args.timeout,
        "watchdog": args.watchdog, "baseline": args.baseline,
        **({"exitfirst": True} if args.exitfirst else {})})  # a -x verdict is partial: reused by -x runs only
    # the worker slots are shared among the kernels that run (a reused verdict needs none): one
    # changed kernel gets every slot
    running = max(1, sum(not p.reused for p in plans))
    parallel = args.jobs if isinstance(args.jobs, int) else common.default_jobs(backend, running, shardable=case is None)
    shards = 1 if case else (args.shards or max(1, free_slots(args, backend, parallel) // running))
    for e, p in zip(entries, plans):
        print(f"verify: {e.op}/{e.name}: {p.describe()}", flush=True)
    # longest first (the last run's costs): no worker idles at the end while one runs a long kernel
    to_run = [e for e, p in zip(entries, plans) if not p.reused]
    if len(to_run) > 1:  # nothing to order otherwise (and the last verify.json is 10 MB to read)
        to_run = costs.longest_first(to_run, costs.expected(args.report_dir, backend.name))
    failures = {}
    if args.failed_first:
        from harness.incremental import failed_first

        failures = failed_first.last_failures(args.report_dir)
        to_run = failed_first.kernels_first(to_run, failures)
    settings = RunSettings(backend.name, args.seed, max_examples, plugins=tuple(args.plugin), modules=_modules(baseline),
                           case=case.id if case else None, stop_at_first_failure=args.exitfirst)
    session = VerifySession(entries=entries, plans=plans, to_run=to_run, settings=settings, timeout=args.timeout,
                            ci_shard=args.shard or (0, 1), shards=shards, exitfirst=args.exitfirst, store=store,
                            baseline=baseline, failures=failures)
    if args.watchdog is not None:  # the judges read it (harness.settings.current)
        if args.watchdog <= 0:
            raise UsageError(f"--watchdog must be a positive number of seconds, got {args.watchdog}")
        os.environ[WATCHDOG_ENV] = str(args.watchdog)
    return session, parallel, max_examples


def sizing(args: argparse.Namespace) -> None:
    """A --reference problem's sizes as the catalog child fitted them (harness.reference.sizing):
    printed, kept for verify.json's ``kernelbench``, and written into the generated plugin, so
    that the judges and the kernel processes apply them instead of fitting again."""
    if not getattr(args, "reference", None):
        return
    from harness import kernelbench
    from harness.registry import catalog

    found = catalog.KERNELBENCH.get(str(Path(args.reference).resolve()))
    if found is not None:
        args.kernelbench = found
        print(f"verify: {Path(args.reference).name}: {found['scaling_text']}", flush=True)
        if getattr(args, "kernelbench_plugin", None) is not None:
            kernelbench.write_plugin(args, kernelbench.fitted_sizes(found), kernelbench.fitted_real(found))


def free_slots(args: argparse.Namespace, backend, parallel: int) -> int:
    """The worker slots a --reference run shards its one kernel over on the CPU interpreter: those
    the machine's load leaves idle, at least one. Each shard costs a judge and a kernel process, each
    importing torch and declaring the problem (about 3 CPU-seconds, 2026-12-07), against cases that
    mostly cost less: on a busy machine a second shard adds its start-up and takes no core of its
    own. The case set is the same for any number of shards."""
    if not getattr(args, "reference", None) or not backend.is_interpreter or isinstance(args.jobs, int):
        return parallel
    try:
        load = os.getloadavg()[0]
    except OSError:
        return parallel
    return max(1, min(parallel, int((os.cpu_count() or 1) - load + 0.5)))


def kernel_run(parts: list, shards: int) -> dict:
    """One kernel's run from the results of its shards, as verify.json and the store hold it."""
    return {"records": [r.to_dict() for part in parts for r in part.records],
            "status": next((p.status for p in sorted(parts, key=lambda p: p.status is not JobStatus.HARNESS_ERROR)
                            if p.status is not JobStatus.OK), JobStatus.OK).value,
            "seconds": max(p.seconds for p in parts),
            "worker_seconds": round(sum(p.seconds for p in parts), 3), "shards": shards,
            "harness_error": next((p.harness_error for p in parts if p.harness_error), None)}


def _collect(entries: list, plans: list, results: list, shards: int) -> tuple[list[dict], list[dict]]:
    """Each kernel's summary and every record, from this run's jobs or its reused verdict."""
    from reports import verify_report

    kernels, records = [], []
    ran: dict[tuple[str, str], list] = {}  # the jobs ran longest first: each kernel's shards by its name
    for result in results:
        ran.setdefault((result.job.op, result.job.kernel), []).append(result)
    for entry, kept in zip(entries, plans):
        if kept.reused:
            run = kept.saved["payload"]
            extra = {"reused": kept.marker()}
        else:
            run = kernel_run(sorted(ran[(entry.op, entry.name)], key=lambda r: r.job.shard), shards)
            extra = {}
        records += run["records"]
        kernels.append(
            verify_report.kernel_summary(
                entry.op, entry.name, run["records"], status=run["status"], origin=entry.origin,
                value_checks=_value_checks(entry.op), contract=entry.contract.describe(), plugin=entry.plugin,
                forward_only=entry.contract.forward_only,
                seconds=run["seconds"], waivers=entry.contract.waive, worker_seconds=run["worker_seconds"],
                shards=run["shards"], harness_error=run.get("harness_error"), **extra,
            )
        )
    return kernels, records


def _paired(plan: dict | None, entry) -> dict:
    """The Job field that pairs a head kernel with its base kernel (none without --baseline; the
    base kernels' module is in the run's ``RunSettings.modules``)."""
    if plan is None:
        return {}
    from harness.baseline.session import AUTOLOAD

    return {"baseline": plan["pairs"].get((entry.op, entry.name))}


def _modules(plan: dict | None) -> tuple[str, ...]:
    """The modules every kernel process of the run imports: a --baseline run's paired base kernels."""
    if plan is None:
        return ()
    from harness.baseline.session import AUTOLOAD

    return (AUTOLOAD,)


def _value_checks(op: str) -> list[str]:
    """The op's value checks: the forward output and each gradient (each must be compared once)."""
    from harness.registry.registry import REGISTRY

    spec = REGISTRY.op(op)
    return list(spec.value_checks())
