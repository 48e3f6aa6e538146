"""What a verify run writes and how it ends: verify.json and its rendered reports, written
together, the console's summary, and the exit status (0 pass, 1 fail, 130 interrupted, 3 no
verdict: a pinned file changed during the run, or the harness failed on a kernel)."""

from __future__ import annotations

import argparse
import sys
import time

from harness.verify.session import Collected
from vocabulary import JobStatus, Verdict

__all__ = ["finish"]


def finish(args: argparse.Namespace, plan: dict | None, backend, found: Collected, max_examples: int,
           started: float) -> int:
    """verify.json and its rendered reports, written together; the exit status."""
    from harness.cli import outdir
    from reports import console, environment, verify_report, writer

    kernels, records, interrupted, results = found.kernels, found.records, found.interrupted, found.results
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
    errors = [k for k in kernels if k["verdict"] == Verdict.ERROR]
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


def _drift(report: dict, plan: dict, kernels: list[dict], records: list[dict], args) -> list[str]:
    """verify.json's ``baseline``; the reasons the drift breaks the limits asked for."""
    from reports import drift

    report["baseline"] = drift.summarize(plan, kernels, records)
    failures = drift.limit_failures(report["baseline"], max_ulps=args.max_drift_ulps, bitwise=args.require_bitwise)
    if failures:
        report["baseline"]["failed"] = failures
    return failures
