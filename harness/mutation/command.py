"""The ``mutate`` command's campaign, from its set-up to its exit status: the library's tests
started beside it (``--tests``), the sanity step and the mutants in one pool
(harness.mutation.session.CampaignSession), the memcheck looks on a GPU, mutation.json
written (``CampaignReport``) and the outcomes kept for the next run.

Exit status: 0 iff score >= --min-score; 1 if the score is lower or the sanity step failed;
2 when the tests command fails on the unmutated library; 3 when the harness failed; 130 when
interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable

from harness.cli import common
from harness.errors import UsageError
from harness.mutation.setup import CampaignSetup, campaign_header, reused_by, set_up
from vocabulary import Backend

__all__ = ["campaign_exit"]


def _run_pool(args: argparse.Namespace, setup: CampaignSetup, reused, header: dict,
              stop: Callable[[], bool] | None = None):
    """The sanity step and the mutants' jobs (harness.mutation.session); ``stop`` (the --tests
    clean run failed) ends them early, as an interruption would: nothing of this campaign could
    be scored by the tests (run() then exits 2)."""
    from harness.execution.progress import Progress
    from harness.mutation.session import CampaignSession

    looks = None
    if setup.backend.name == Backend.CUDA and not args.no_memcheck and not setup.case:
        from harness.mutation import memcheck_looks

        looks = memcheck_looks.first_looks(
            setup.cache, setup.runnable, parallel=setup.parallel, driver_args=setup.driver_args, on_start=lambda n: print(
                f"mutate: memcheck first look at {n} mutant(s) killed by memcheck last time ...", flush=True))
    session = CampaignSession(setup.plan(args, reused), first_looks=looks)
    print(_estimate_line(args, setup, session), flush=True)
    with Progress("mutate", session.job_count, classify=session.progress_class,
                  shown=("survived", "sanity failed")) as progress:
        check, outcomes = session.run(on_event=progress, stop=stop)
    if looks is not None:
        header["memcheck_first"] = looks.summary()
    return check, outcomes


def _estimate_line(args: argparse.Namespace, setup: CampaignSetup, session) -> str:
    """How long the campaign will take, from its mutant count and the op's cost a case."""
    from harness.mutation import estimate
    from harness.registry.registry import REGISTRY

    def cases_of(op: str) -> int:
        return len(REGISTRY.op(op).floor_cases(backend=setup.backend.name)) + setup.max_examples

    sanity_ops = sorted({job.op for job in session.checks})
    return estimate.describe(estimate.estimate(session.to_run, sanity_ops, parallel=setup.parallel,
                                               report_dir=args.report_dir, backend=setup.backend.name,
                                               cases_of=cases_of, one_case=bool(setup.case)))


def _finish(report, refused: str | None = None, *, scored: bool = True) -> dict:
    """Write and print mutation.json (harness.mutation.session.CampaignReport); Ctrl-C waits
    until the files are written."""
    from harness.cli import outdir
    from reports import mutation_report

    with outdir.signals_held():
        data, path = report.write(refused, scored=scored)
        mutation_report.print_mutation(data, path=str(path), full=sys.stdout.isatty())
    return data


def campaign_exit(args: argparse.Namespace) -> int:
    from harness.mutation import schema

    if getattr(args, "no_schemata", False):  # before any mutant is registered, here and in every worker
        os.environ[schema.ENV] = "0"
    backend = common.prepare(args)
    started = time.monotonic()
    setup = set_up(args, backend)
    tests = _start_tests(args, setup)
    try:
        reused = reused_by(args, setup)
        header = campaign_header(args, setup)
        header["schemata"] = schema.enabled()
        check, outcomes = _run_pool(args, setup, reused, header, stop=tests.clean_failed if tests else None)
    except BaseException:
        if tests is not None:
            tests.stop_clean()
            tests.close()
        raise
    if tests is not None:
        if check.interrupted and not tests.clean_failed():
            tests.stop_clean()  # the user's interruption: the clean run is not waited for
        else:
            _clean_verdict(args, tests)  # exit 2 if the command fails on the unmutated library
    from harness.mutation.session import CampaignReport

    report = CampaignReport(header, reused.sanity_record(check), outcomes, started, args.report_dir, args.min_score,
                            setup.backend.name, setup.cache, setup.cache_path, setup.hints_from,
                            library=bool(setup.library), tests=tests)
    if check.interrupted:  # what finished is kept; the score covers only that
        header.update(interrupted=True, not_run=check.not_run)
        if check.passed:  # the next run resumes from the final outcomes
            reused.save(outcomes, partial=True)
        _finish(report, f"interrupted after {len(outcomes)} of {len(outcomes) + len(check.not_run)} mutants: the score "
                      "covers only those and is not a verdict" + ("" if check.passed else f"; sanity: {check.reason}"))
        return 130
    if not check.passed:
        _finish(report, check.reason, scored=False)
        if check.harness_error:
            from harness.launcher import NO_VERDICT

            print(f"mutate: no verdict (exit {NO_VERDICT}): the harness failed; see above", file=sys.stderr)
            return NO_VERDICT
        return 1
    if tests is not None:  # the library's tests against the mutants, beside the memcheck second look
        tests.start_mutants(outcomes)
    try:
        interrupted = _second_look(args, setup, header, outcomes)
    except BaseException:
        if tests is not None:
            tests.stop_mutants()
        raise
    if interrupted:
        if tests is not None:
            tests.stop_mutants()
        _finish(report, interrupted)
        return 130
    reused.save(outcomes)  # a complete campaign whose sanity step passed
    if tests is not None and not tests.wait_mutants():
        header.update(interrupted=True, not_run=[])
        _finish(report, f"interrupted while the tests ran against the mutants ({tests.summary()['run']} run): "
                      "the scores are not a verdict")
        return 130
    return 0 if _finish(report)["passed"] else 1


def _second_look(args: argparse.Namespace, setup: CampaignSetup, header: dict, outcomes: list) -> str | None:
    """On a GPU, memcheck on the survivors; why the score is no verdict if it was interrupted."""
    from harness.mutation import memcheck_looks

    if setup.backend.name != Backend.CUDA or args.no_memcheck:
        return None
    return memcheck_looks.second_look_of(
        outcomes, header, parallel=setup.parallel, driver_args=setup.driver_args,
        on_start=lambda n: print(f"mutate: memcheck second look at {n} survivor(s) ...", flush=True),
        on_done=lambda o: print(f"  {o.entry.name}: {o.status.value}" + (f" ({o.killed_by['message'][:120]})"
                                                                         if o.killed_by else ""), flush=True))


def _start_tests(args: argparse.Namespace, setup: CampaignSetup):
    """--tests: the command on the unmutated library, started beside the campaign (which does not
    depend on it); the scoring object that runs it against the mutants later."""
    if args.tests is None:
        return None
    from harness.mutation import campaign
    from harness.mutation.library_tests import Scoring

    tests = Scoring(args.tests, cwd=os.getcwd(), jobs=args.tests_jobs or setup.parallel, sample_size=args.tests_sample,
                    interpreter=setup.backend.is_interpreter, timeout=args.timeout,
                    factor=campaign.TIMEOUT_FACTOR, margin=campaign.TIMEOUT_MARGIN_S)
    print(f"mutate: the tests command on the unmutated library, beside the campaign: {args.tests}", flush=True)
    tests.start_clean()
    return tests


def _clean_verdict(args: argparse.Namespace, tests) -> None:
    """The clean run must pass (else exit 2 with the end of its output): a command that fails
    without a mutant cannot score its tests."""
    clean = tests.wait_clean()
    if not clean.passed:
        tests.close()
        print(clean.tail, file=sys.stderr)
        why = f"it ran past {tests.clean_limit:.0f} s" if clean.timed_out else f"exit status {clean.exit_status}"
        raise UsageError(f"--tests {args.tests!r} fails on the unmutated library ({why}; the end of its output is "
                         "above): a command that fails without a mutant cannot score its tests")
    print(f"mutate: the tests command passes on the unmutated library in {clean.seconds:.1f} s", flush=True)
