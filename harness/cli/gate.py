"""``python -m harness gate``: the merge gate that ``make verify`` runs, in one process.

Its steps are the commands a user can run one by one, with the same arguments: ``verify
--no-render``, ``train-check``, ``mutate``, then ``report``. Every step runs even after a failure
(the reports show them all) and the exit status is the last failing step's, or 3 when a step has no
verdict (the harness's own code failed: harness.execution.fault); an interrupted step
(Ctrl-C, a CI time limit) ends the gate there, status 130.

The plain gate (no ``--baseline``, no extra arguments) runs the steps in this one process: each
loads the same project kernels and op specs and sets nothing another reads, and one process
instead of four saves three start-ups of torch, Triton and the registry, which is most of what a
gate with nothing changed spends (each step's verdicts come from REPORT_DIR/incremental). With a
base revision or extra arguments (a plugin, a watchdog: state one step loads into its process)
each step gets a process of its own, as when run one by one.
"""

from __future__ import annotations

import argparse
import shlex

from harness.cli import common
from harness.errors import UsageError

NAME = "gate"
HELP = "the merge gate in one process: verify, train-check, the mutation campaign, then the reports"
EXAMPLE = "python -m harness gate --backend auto --report-dir reports/out"
INTERRUPTED = 130


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="auto", help="auto|cuda|interpreter (default: auto)")
    # not dest report_dir: the gate holds no lock of its own, each step takes the directory's in turn
    p.add_argument("--report-dir", dest="gate_dir", default=common.DEFAULT_REPORT_DIR, metavar="DIR",
                   help=f"where every step writes (default: {common.DEFAULT_REPORT_DIR})")
    p.add_argument("--jobs", type=common.jobs_arg, default="auto", metavar="N|auto",
                   help="mutation workers (mutate --jobs; default: auto)")
    p.add_argument("--no-cache", action="store_true", help="every step anew, reusing no saved verdict or mutant outcome")
    p.add_argument("--baseline", metavar="REV", default=None, help="verify --baseline REV")
    p.add_argument("--verify-args", default="", metavar="'ARGS'", help="more arguments of the verify step, one string")
    p.add_argument("--mutate-args", default="", metavar="'ARGS'", help="more arguments of the mutate step, one string")


def steps(args: argparse.Namespace) -> list[list[str]]:
    """The command line of each step, in order."""
    def split(text: str, option: str) -> list[str]:
        try:
            return shlex.split(text)
        except ValueError as exc:
            raise UsageError(f"gate {option}: {exc}") from None

    common_args = ["--backend", args.backend, "--report-dir", args.gate_dir]
    fresh = ["--no-cache"] if args.no_cache else []
    baseline = ["--baseline", args.baseline] if args.baseline else []
    return [
        ["verify", *common_args, "--no-render", *fresh, *baseline, *split(args.verify_args, "--verify-args")],
        ["train-check", *common_args, *fresh],
        ["mutate", *common_args, "--jobs", str(args.jobs), "--no-render", *fresh, *split(args.mutate_args, "--mutate-args")],
        ["report", "--report-dir", args.gate_dir],
    ]


def run(args: argparse.Namespace) -> int:
    import datetime
    import os

    from harness.cli import main
    from reports.manifest import GROUP_ENV

    # one run group for the steps (as make verify exports it), so their reports render together
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    os.environ.setdefault(GROUP_ENV, f"gate-{stamp}-{os.getpid()}")
    shared = not (args.baseline or args.verify_args.strip() or args.mutate_args.strip())
    from harness.launcher import NO_VERDICT

    rc = 0
    for step in steps(args):
        code = main(step) if shared else own_process(step)
        if code == INTERRUPTED:
            return code
        rc = rc if rc == NO_VERDICT else (code or rc)  # a step with no verdict (the harness failed) stays the gate's
    return rc


def own_process(step: list[str]) -> int:
    """Run one step as ``python -m harness STEP ...``; a Ctrl-C reaches it and ends the gate."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "harness", *step])
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)  # the step writes its reports, as a Ctrl-C of its own would let it
        proc.wait()
        return INTERRUPTED
