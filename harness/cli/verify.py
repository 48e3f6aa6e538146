"""``python -m harness verify``: every selected kernel against its op's properties. Parses and
says usage errors; the run itself is harness.verify (its session, then its report)."""

from __future__ import annotations

import argparse
import time

from harness.cli import common
from harness.errors import UsageError
from harness.settings import DEFAULTS
from vocabulary import EntryKind

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
                   help="stop at the first failed case (not shrunk): the other running kernels stop and no "
                        "further kernel starts; the report holds the failed kernel, the others are listed as not "
                        "run (exit 1)")
    common.add_with_project(p, verb="verify", what="kernels")
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

    head = [e for e in REGISTRY.select(kind=EntryKind.KERNEL) if e.origin is not Origin.BASELINE]
    with baseline(args.baseline, head, tuple(args.plugin)) as plan:  # the worktree is removed on any way out
        return _run(args, plan)


def _run(args: argparse.Namespace, plan: dict | None) -> int:
    started = time.monotonic()
    # no plugin, problem or candidate is imported here (a --baseline run loads the base revision's beside the head's)
    backend = common.prepare(args, described=plan is None)
    from harness import shortcut
    from harness.execution.progress import Progress
    from harness.verify import report, session

    session.sizing(args)
    verify, parallel, max_examples = session.open_session(args, backend, plan)
    if verify.jobs:
        with Progress("verify", len(verify.jobs)) as progress:
            found = verify.run(parallel=parallel, on_event=progress)
    else:
        found = verify.result([])
    shortcut.apply_strict(found.kernels, getattr(args, "strict", False))
    return report.finish(args, plan, backend, found, max_examples, started)
