"""``python -m harness verify``: every selected kernel against its op's properties."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from harness.cli import common
from harness.errors import UsageError
from harness.settings import DEFAULTS, WATCHDOG_ENV

NAME = "verify"
HELP = "check registered kernels against float64 oracles, case by case"
EXAMPLE = "python -m harness verify --plugin my_kernels.py --select 'my_*' --backend interpreter"


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_selection(p)
    p.add_argument("--reference", metavar="PROBLEM.py", default=None,
                   help="a KernelBench problem file (Model, get_inputs, get_init_inputs): verify --candidate's ModelNew "
                        "against Model's forward in float64 (harness.kernelbench)")
    p.add_argument("--candidate", metavar="SOLUTION.py", default=None,
                   help="with --reference: the file defining ModelNew, built with the same constructor arguments")
    p.add_argument("--low-precision", action="store_true",
                   help="with --reference: also fp16 and bf16 cases of a problem whose inputs are fp32 (default: "
                        "the problem's own dtypes only)")
    p.add_argument("--case", metavar="CASE_ID", help="re-run exactly one case (the id printed in reports); its "
                   "reports go to reports/repro unless --report-dir is given, never over a full run's")
    p.add_argument("-x", "--exitfirst", action="store_true",
                   help="stop at the first failed case: each running kernel stops at its first failure (not "
                        "shrunk) and no further kernel starts; the report holds what ran (exit 1)")
    p.add_argument("--with-project", action="store_true",
                   help="with --plugin: verify the project's kernels too (by default --plugin without --select verifies "
                        "the plugin files' kernels only)")
    p.add_argument("--failed-first", action="store_true",
                   help="run the last run's failing cases first (REPORT_DIR/verify.json): its failed kernels start "
                        "first, each with its failed floor cases; the same cases run, in another order")
    p.add_argument("--timeout", type=float, default=DEFAULTS.job_timeout_s, metavar="SECONDS", help="per-kernel time limit")
    p.add_argument("--shards", type=common.at_least_one, default=None, metavar="K",
                   help="split each kernel's cases over K workers; the case set is the same for any K "
                        "(default: spare worker slots shared among the kernels; a --reference run on the CPU interpreter "
                        "takes only the cores the machine's load leaves idle, at least one)")
    p.add_argument("--allow-unverified", action="store_true",
                   help="exit 0 even when a kernel is 'not verified' (no in-contract case, or an output never "
                        "compared with the oracle); by default that fails the run")
    p.add_argument("--watchdog", type=float, default=None, metavar="SECONDS",
                   help="a kernel call that has not returned after max(SECONDS, 20 x the slowest call so far) is a "
                        "hang: the case fails with `timeout` and the kernel's job ends (default: harness.settings)")
    common.add_shard(p, what="cases of every kernel")
    p.add_argument("--baseline", metavar="REV", default=None,
                   help="also run the kernels of git revision REV of the project and of each --plugin file's repository "
                        "(temporary worktrees) on the same cases and report, "
                        "per kernel and case, bitwise identity, ulps and the error share against REV's")
    p.add_argument("--max-drift-ulps", type=int, default=None, metavar="N",
                   help="with --baseline: fail (exit 1) when an output differs from REV's by more than N ulps")
    p.add_argument("--require-bitwise", action="store_true",
                   help="with --baseline: fail (exit 1) when an output is not bitwise identical to REV's")
    p.add_argument("--strict", action="store_true",
                   help="FAIL a kernel flagged as a shortcut (a --candidate that calls the reference Model or the "
                        "problem's own torch op for the whole computation; harness.shortcut), which otherwise "
                        "passes with the flag")
    p.add_argument("--no-render", action="store_true",
                   help="write verify.json only, not index.html / junit.xml / summary.md (make verify renders "
                        "them once, at its end, with `python -m harness report`)")
    p.add_argument("--no-cache", action="store_true",
                   help="run every kernel, reusing no saved verdict (otherwise a kernel's verdict is reused while "
                        "nothing that can change it has changed: REPORT_DIR/incremental)")


def run(args: argparse.Namespace) -> int:
    from harness import kernelbench

    plugins = kernelbench.pin_in_place(args.plugin)  # before any user code runs
    if args.reference is not None or args.candidate is not None:
        kernelbench.use_in_verify(args)  # the problem's op and the candidate as a plugin kernel of it
    if plugins:
        args.pinned = {**(getattr(args, "pinned", None) or {}), "plugins": plugins}
    if args.baseline is None:
        if args.max_drift_ulps is not None or args.require_bitwise:
            raise UsageError("--max-drift-ulps and --require-bitwise compare with a base revision: add --baseline REV")
        return _run(args, None)
    if args.max_drift_ulps is not None and args.max_drift_ulps < 0:
        raise UsageError(f"--max-drift-ulps must be >= 0, got {args.max_drift_ulps}")
    common.prepare(args)  # the head's kernels, before the base's are loaded beside them (here: see docs/guarantees.md)
    from harness.baseline.session import baseline
    from harness.registry.registry import REGISTRY, Origin

    head = [e for e in REGISTRY.select(kind="kernel") if e.origin is not Origin.BASELINE]
    with baseline(args.baseline, head, tuple(args.plugin)) as plan:  # the worktree is removed on any way out
        return _run(args, plan)


def _sizing(args: argparse.Namespace) -> None:
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
            kernelbench.write_plugin(args, kernelbench.fitted_sizes(found))


def _run(args: argparse.Namespace, plan: dict | None) -> int:
    started = time.monotonic()
    # no plugin, problem or candidate is imported here (a --baseline run loads the base revision's beside the head's)
    backend = common.prepare(args, described=plan is None)
    _sizing(args)
    from harness.execution.jobs import JobStatus, run_jobs
    from harness.execution.progress import Progress
    from harness.incremental import costs
    from harness.incremental import plan as incremental
    from harness.incremental.store import Store

    entries, case = _entries(args)
    if case is not None:
        from properties import layouts

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
    shards = 1 if case else (args.shards or max(1, _free_slots(args, backend, parallel) // running))
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
    jobs = _jobs(args, plan, to_run, backend.name, case, max_examples, shards)
    for job in jobs:
        job.floor_first = failures.get(f"{job.op}/{job.kernel}", ())
    if args.watchdog is not None:  # the judges read it (harness.settings.current)
        if args.watchdog <= 0:
            raise UsageError(f"--watchdog must be a positive number of seconds, got {args.watchdog}")
        os.environ[WATCHDOG_ENV] = str(args.watchdog)
    results = []
    first = _FirstFailure() if args.exitfirst else None
    if jobs:
        with Progress("verify", len(jobs)) as progress:
            # a fresh process per job: one kernel's global side effects (a plugin that patches torch)
            # can never reach another's verdict; the shards of a kernel run side by side anyway
            keep = _Keeper(entries, plans, shards, store)  # saved before the line that says it ended
            results = run_jobs(jobs, parallel=parallel, reuse=False, decide=first and first.decide,
                               on_event=lambda e: (keep(e), progress(e), first and first(e)))
    not_run = {(r.job.op, r.job.kernel) for r in results if r.status is JobStatus.SKIPPED}
    results = [r for r in results if r.status is not JobStatus.SKIPPED]
    not_run -= {(r.job.op, r.job.kernel) for r in results}  # a kernel whose other shards ran is reported
    if not_run:
        kept = [(e, p) for e, p in zip(entries, plans) if (e.op, e.name) not in not_run]
        entries, plans = [e for e, _ in kept], [p for _, p in kept]
        print(f"verify: stopped at the first failure (-x); not run: "
              f"{', '.join(sorted(f'{op}/{name}' for op, name in not_run))}", file=sys.stderr)
    kernels, records = _collect(entries, plans, results, shards)
    from harness import shortcut

    shortcut.apply_strict(kernels, getattr(args, "strict", False))
    interrupted = any(r.status is JobStatus.INTERRUPTED for r in results)
    return _report(args, plan, backend, kernels, records, max_examples, interrupted, results, started)


def _free_slots(args: argparse.Namespace, backend, parallel: int) -> int:
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


def _entries(args: argparse.Namespace) -> tuple[list, "Case | None"]:
    """The kernels to verify and the one case of ``--case`` (or None); usage errors exit 2."""
    from harness.cases.case import Case
    from harness.registry.registry import REGISTRY, Origin

    entries = [e for e in REGISTRY.select(op=args.op, kind="kernel", pattern=args.select) if e.origin is not Origin.BASELINE]
    if args.plugin and args.select == "*" and not args.with_project:
        # --plugin alone: the plugin's kernels, not the project's too (--select or --with-project ask for them)
        entries = [e for e in entries if e.origin is Origin.PLUGIN]
        if not entries:
            raise UsageError(f"--plugin {' '.join(args.plugin)} registers no kernel{' of op ' + args.op if args.op else ''}; "
                             "add --with-project to verify the project's kernels, or --select GLOB to choose kernels")
    if not entries:
        known = ", ".join(e.name for e in REGISTRY.select(op=args.op, kind="kernel")) or "none"
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


def _jobs(args: argparse.Namespace, plan: dict | None, to_run: list, backend: str, case, max_examples: int, shards: int) -> list:
    """``shards`` jobs per kernel to run. CI part I of K is split again over the local shards:
    local shard j runs the suite's global shard I + K*j of K*shards, so the K parts' local
    shards are every global shard once."""
    from harness.execution.jobs import Job

    ci_part, ci_parts = args.shard or (0, 1)
    return [
        Job(op=e.op, kernel=e.name, backend=backend, seed=args.seed, max_examples=max_examples,
            plugins=tuple(args.plugin), case=case.id if case else None, timeout=args.timeout,
            stop_at_first_failure=args.exitfirst,
            shard=ci_part + ci_parts * i, shards=ci_parts * shards, **_paired(plan, e))
        for e in to_run
        for i in range(shards)
    ]


class _FirstFailure:
    """on_event and decide of verify's pool under -x: once a job has ended with a failed case (or
    not ended OK), every job not yet started is skipped."""

    def __init__(self) -> None:
        self.failed = False

    def __call__(self, event) -> None:
        from harness.execution.jobs import EventKind, JobStatus

        result = event.result
        if event.kind is EventKind.DONE and result is not None:
            self.failed |= result.status is not JobStatus.OK or not all(r.passed for r in result.records)

    def decide(self, job):
        from harness.execution.jobs import Decision

        return Decision.SKIP if self.failed else Decision.RUN


class _Keeper:
    """on_event of verify's pool: a kernel's complete run (every shard ended OK: no crash, hang or
    Ctrl-C) is saved for the next run the moment its last shard ends, so that a run stopped later
    (a CI limit, Ctrl-C) keeps the kernels that finished."""

    def __init__(self, entries: list, plans: list, shards: int, store) -> None:
        self.store, self.shards, self.ended = store, shards, {}
        self.plans = {(e.op, e.name): (e, p) for e, p in zip(entries, plans) if not p.reused}

    def __call__(self, event) -> None:
        from harness.execution.jobs import EventKind, JobStatus
        from harness.incremental import plan as incremental

        if event.kind is not EventKind.DONE or event.result is None:
            return
        key = (event.job.op, event.job.kernel)
        parts = self.ended.setdefault(key, [])
        parts.append(event.result)
        if len(parts) == self.shards and all(p.status is JobStatus.OK for p in parts):
            entry, kept = self.plans[key]
            parts.sort(key=lambda p: p.job.shard)
            incremental.remember(self.store, incremental.VERIFY, f"{entry.op}/{entry.name}", kept, _kernel_run(parts, self.shards))


def _kernel_run(parts: list, shards: int) -> dict:
    """One kernel's run from the results of its shards, as verify.json and the store hold it."""
    from harness.execution.jobs import JobStatus

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
            run = _kernel_run(sorted(ran[(entry.op, entry.name)], key=lambda r: r.job.shard), shards)
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


def _report(args: argparse.Namespace, plan: dict | None, backend, kernels: list, records: list, max_examples: int,
            interrupted: bool, results: list, started: float) -> int:
    """verify.json and its rendered reports, written together; the exit status."""
    from harness.cli import outdir
    from harness.execution.jobs import JobStatus
    from reports import console, environment, verify_report, writer

    header = environment.header(backend.describe(), seed=args.seed)
    header["seconds"] = round(time.monotonic() - started, 1)  # wall time of the whole command
    header["max_examples"] = max_examples
    if args.exitfirst:
        header["exitfirst"] = True  # stopped at the first failure: the report holds what ran
    if args.shard is not None:  # `report --merge` checks that every part of the same run is there
        header["shard"] = {"index": args.shard[0], "count": args.shard[1]}
    if interrupted:
        header["interrupted"] = True  # stopped early (Ctrl-C or SIGTERM): what ran is kept, the verdict is FAIL
    changed = _tampered(args, header)
    report = verify_report.build(header, kernels, records, allow_unverified=args.allow_unverified)
    if changed:
        report["passed"] = False
    drift_failures = _drift(report, plan, kernels, records, args) if plan is not None else []
    with outdir.signals_held():  # a second Ctrl-C waits: verify.json and its rendered reports are written together
        path = writer.write_json(args.report_dir, "verify.json", report)
        console.print_verify(report, path=str(path))
        if plan is not None:
            from reports import drift

            print("\n".join(drift.console_lines(report["baseline"])))
        if not args.no_render:
            from harness.cli import report as report_cli

            report_cli.write_after_run(args.report_dir)  # a rendering failure warns; the exit status stays the verdict
    if interrupted:
        running = [f"{r.job.label} was running {r.current}" for r in results if r.status is JobStatus.INTERRUPTED and r.current]
        print("verify: interrupted; the report holds the cases that ran" + (": " + "; ".join(running) if running else ""),
              file=sys.stderr)
        return 130
    for reason in drift_failures:
        print(f"verify: drift limit: {reason}", file=sys.stderr)
    if changed:
        from harness.launcher import NO_VERDICT

        print(f"verify: tampered: {', '.join(changed)} changed on disk during the run; no verdict (exit {NO_VERDICT})",
              file=sys.stderr)
        return NO_VERDICT
    errors = [k for k in kernels if k["verdict"] == verify_report.ERROR]
    if errors:
        from harness.launcher import NO_VERDICT

        print(f"verify: no verdict (exit {NO_VERDICT}): the harness failed on {len(errors)} kernel(s); see above",
              file=sys.stderr)
        return NO_VERDICT
    return 0 if report["passed"] and not drift_failures else 1


def _tampered(args: argparse.Namespace, header: dict) -> list[str]:
    """The pinned files' hashes (--plugin files, --reference/--candidate) into verify.json, and
    those that changed on disk during the run (a verdict on them would be on other code than was
    given: none is given)."""
    if not getattr(args, "pinned", None):
        return []
    from harness import kernelbench

    header["pinned"] = args.pinned
    if getattr(args, "kernelbench", None):
        header["kernelbench"] = args.kernelbench  # the problem's sizing (harness.reference.sizing)
    changed = kernelbench.tampered()
    if changed:
        header["tampered"] = changed
    return changed


def _paired(plan: dict | None, entry) -> dict:
    """The Job fields that pair a head kernel with its base kernel (none without --baseline)."""
    if plan is None:
        return {}
    from harness.baseline.session import AUTOLOAD

    return {"extra_modules": (AUTOLOAD,), "baseline": plan["pairs"].get((entry.op, entry.name))}


def _drift(report: dict, plan: dict, kernels: list[dict], records: list[dict], args) -> list[str]:
    """verify.json's ``baseline``; the reasons the drift breaks the limits asked for."""
    from reports import drift

    report["baseline"] = drift.summarize(plan, kernels, records)
    failures = drift.limit_failures(report["baseline"], max_ulps=args.max_drift_ulps, bitwise=args.require_bitwise)
    if failures:
        report["baseline"]["failed"] = failures
    return failures


def _value_checks(op: str) -> list[str]:
    """The op's value checks: the forward output and each gradient (each must be compared once)."""
    from harness.registry.registry import REGISTRY

    spec = REGISTRY.op(op)
    return list(spec.value_checks())
