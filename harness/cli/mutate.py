"""``python -m harness mutate``: the mutation campaign and its score gate.

Runs every selected mutant (hand-written catalog, generated from the kernels' source,
plugin ``register_mutant`` entries) against the same properties as ``verify``. With
``--mutate-module MODULE``, the mutants are those of a library's ``@triton.jit`` functions,
run through the ``--plugin`` kernels that call into it (harness.mutation.library), and
``--tests COMMAND`` scores the library's own tests against the same mutants
(harness.mutation.library_tests).
Exit status: 0 iff score >= --min-score; 1 if the score is lower, or if the campaign
refuses to score because the sanity step failed (the unmutated kernel fails its suite, or a
forced failure passes it; the report says which); 2 on bad usage, or when the tests command
fails on the unmutated library.

Length (over 400 lines): argument checks and console output for three kinds of campaign (the
project's, a library's, a library's own tests); the campaign's run is harness.mutation.session.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Callable

from harness.cases import shard
from harness.cli import common
from harness.errors import UsageError

NAME = "mutate"
HELP = "mutation testing: run broken variants of the kernels and score how many the checks detect"
EXAMPLE = "python -m harness mutate --op rmsnorm --select 'cat.*' --backend interpreter"
DEFAULT_MAX_EXAMPLES = {"interpreter": 5, "cuda": 50}


def fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction between 0 and 1, got {value}")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a time limit > 0 seconds, got {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_selection(p)
    p.add_argument("--timeout", type=seconds, default=None, metavar="SECONDS",
                   help="per-mutant time limit (default: 5x the clean run's time + 60 s)")
    p.add_argument("--no-render", action="store_true",
                   help="write mutation.json only, not index.html / junit.xml / summary.md (make verify renders them "
                        "once, at its end)")
    p.add_argument("--min-score", type=fraction, default=1.0, metavar="FRACTION",
                   help="exit 1 if the mutation score is below this (default: 1.0)")
    p.add_argument("--case", metavar="CASE_ID", help="run only this case (the repro of a kill)")
    p.add_argument("--kill-cache", default=None, metavar="PATH|none",
                   help="where the cases that killed each mutant are kept between campaigns, to try them first "
                        "(only the floor's order changes; default: REPORT_DIR/kill_cache.json; none: off)")
    p.add_argument("--no-memcheck", action="store_true",
                   help="on a GPU, skip the compute-sanitizer memcheck looks (the first look at the mutants "
                        "memcheck killed last time, the second look at survivors)")
    p.add_argument("--isolate", action="store_true",
                   help="a fresh worker process for every mutant (default: a healthy worker runs mutant after "
                        "mutant; a crash, hang or CUDA error still costs only that worker)")
    common.add_shard(p, what="mutants (split by a stable hash of their names; every part runs the sanity step)")
    p.add_argument("--no-cache", action="store_true",
                   help="run every mutant, reusing no saved outcome (otherwise a mutant's outcome is reused while "
                        "nothing that can change it has changed: REPORT_DIR/incremental)")
    lib = p.add_argument_group("library mutation (a third-party module's kernels, run through --plugin kernels)")
    lib.add_argument("--mutate-module", action="append", default=[], metavar="MODULE",
                     help="mutate every @triton.jit function of this importable module instead of the project's "
                          "kernels (repeatable); mutants are named gen.MODULE.FUNCTION.OPERATOR.K")
    lib.add_argument("--carrier", default="*", metavar="GLOB",
                     help="the --plugin kernels that may run a module's mutants (default: any; the one nearest to "
                          "the module is chosen, ties by op and name)")
    lib.add_argument("--equivalent", metavar="FILE",
                     help="TOML or JSON marks of equivalent library mutants: [[equivalent]] name, fingerprint, reason "
                          "(a mark whose fingerprint no longer matches is reported, not applied)")
    lib.add_argument("--tests", metavar="COMMAND",
                     help="also run this shell command (the library's own tests) against every mutant, with the "
                          "mutant swapped in inside its Python processes; it must pass on the unmutated library")
    lib.add_argument("--tests-sample", type=common.at_least_one, default=None, metavar="N",
                     help="run the tests against a deterministic sample of N mutants only (named in the report)")
    lib.add_argument("--tests-jobs", type=common.at_least_one, default=None, metavar="N",
                     help="test command processes side by side (default: the campaign's --jobs)")


@dataclasses.dataclass
class _Setup:
    """What one campaign runs, decided before anything runs."""

    backend: object
    entries: list  # the selected, observable mutants of this part (--shard)
    unobservable: list
    ops: list[str]
    case: str | None
    max_examples: int
    equivalent: dict
    runnable: list
    parallel: int
    modules: tuple[str, ...]  # mutant modules every worker imports (project campaigns)
    library: tuple[str, ...]  # --mutate-module (library campaigns)
    cache_path: Path | None
    cache: dict
    kills: dict
    targets: list = dataclasses.field(default_factory=list)  # harness.mutation.library.Target
    hints_from: str = "none"  # where the kill cache came from (harness.mutation.kill_cache.read)
    driver_args: tuple[str, ...] = ()  # what the sanitizer's driver needs to find a library mutant

    def plan(self, args: argparse.Namespace, reused):
        from harness.mutation import campaign
        from harness.mutation.session import CampaignPlan

        return CampaignPlan(tuple(self.entries), self.backend.name, args.seed, self.max_examples, self.parallel,
                            equivalent=self.equivalent, ops=tuple(self.ops), plugins=tuple(args.plugin),
                            modules=self.modules, case=self.case, timeout=args.timeout, reuse=not args.isolate,
                            hints=campaign.floor_hints(self.kills), saved=reused.saved,
                            saved_sanity=reused.saved_sanity, verified=reused.verified, library=self.library, carrier=args.carrier)


def _check_library_options(args: argparse.Namespace) -> None:
    if args.mutate_module:
        return
    for flag, value in (("--tests", args.tests), ("--tests-sample", args.tests_sample), ("--tests-jobs", args.tests_jobs),
                        ("--equivalent", args.equivalent), ("--carrier", None if args.carrier == "*" else args.carrier)):
        if value is not None:
            raise UsageError(f"{flag} applies to library campaigns only: add --mutate-module MODULE "
                             "(the project's own equivalence marks live in properties/mutants/equivalent.toml)")


def _load_mutants(args: argparse.Namespace) -> tuple[tuple[str, ...], list]:
    """The project's mutant modules (imported), or the library's mutants (registered)."""
    from harness.mutation import campaign, library

    if not args.mutate_module:
        return campaign.load_mutants(), []
    if not args.plugin:
        raise UsageError("--mutate-module needs --plugin FILE: a plugin whose kernels call into the library")
    targets = library.register(tuple(args.mutate_module), args.carrier)
    for t in targets:
        if not t.mutants:
            print(f"mutate: {t.module} defines no @triton.jit function: nothing to mutate there (mutate the modules "
                  "whose kernels it launches)", flush=True)
        else:
            print(f"mutate: {t.module}: {len(t.mutants)} mutant(s), run through "
                  + ", ".join(sorted({c.name for c in t.carriers.values()})), flush=True)
    return (), targets


def _selected(args: argparse.Namespace, backend) -> tuple[list, list]:
    """The selected mutants observable on this backend, and those that are not."""
    from harness.mutation import campaign, library

    entries = campaign.select(args.op, args.select)
    if args.mutate_module:
        entries = library.mutants_of(entries)
    if not entries:
        known = len(campaign.select(args.op, "*"))
        example = "gen.MODULE.FUNCTION.*" if args.mutate_module else "'cat.*' or 'gen.rmsnorm_forward.*'"
        raise UsageError(
            f"--select {args.select!r} matches no mutant{' of op ' + args.op if args.op else ''} "
            f"({known} registered); use a glob such as {example}"
        )
    unobservable = [e for e in entries if not campaign.observable_on(e, backend.name)]
    entries = [e for e in entries if campaign.observable_on(e, backend.name)]
    if not entries:
        raise UsageError(f"the selected mutants can only be detected on {unobservable[0].meta['backends']}, not on {backend.name}")
    return entries, unobservable


def _case(args: argparse.Namespace) -> str | None:
    from harness.cases.case import Case
    from harness.registry.registry import REGISTRY

    if not args.case:
        return None
    case = Case.parse(args.case)
    REGISTRY.op(case.op).validate_case(case)  # a malformed case is bad usage (exit 2)
    return case.id


def _equivalent(args: argparse.Namespace) -> dict:
    from harness.mutation import campaign

    if not args.mutate_module:
        return campaign.load_equivalent()
    if args.equivalent is None:
        return {}
    from harness.mutation import equivalence

    return equivalence.load(Path(args.equivalent))


def _set_up(args: argparse.Namespace, backend) -> _Setup:
    from harness.mutation import campaign

    _check_library_options(args)
    modules, targets = _load_mutants(args)
    entries, unobservable = _selected(args, backend)
    equivalent = _equivalent(args)
    reach = {e.name: m for e in entries if (m := campaign.out_of_reach(e, equivalent, backend.name))}
    if reach:  # real bugs no case can reach here: listed apart, as the backend-only ones
        unobservable += [e for e in entries if e.name in reach]
        entries = [e for e in entries if e.name not in reach]
        if not entries:
            raise UsageError(f"the selected mutants are all marked out of reach on {backend.name} "
                             f"({', '.join(sorted(reach))}): no case here can detect them")
    ops = sorted({e.op for e in entries})  # before --shard: every part runs the sanity step of every op
    entries = [e for e in entries if shard.in_part(e.name, args.shard)]
    case = _case(args)
    if case:
        from harness.cases.case import Case
        from properties import layouts

        layouts.check_backend(Case.parse(case), backend.name)  # an index-width case needs a GPU (exit 2 elsewhere)
    max_examples = 0 if case else (args.max_examples if args.max_examples is not None else DEFAULT_MAX_EXAMPLES[backend.name])
    runnable = [e for e in entries if not campaign.is_marked(e, equivalent, backend.name)]
    parallel = common.mutate_jobs(args.jobs, backend, max(2, len(runnable)))
    cache_path = None if args.kill_cache == "none" else Path(args.kill_cache or Path(args.report_dir) / "kill_cache.json")
    from harness.mutation import kill_cache

    cache, hints_from = kill_cache.read(cache_path)
    kills = cache.setdefault("backends", {}).setdefault(backend.name, {})
    from harness.mutation import library

    return _Setup(backend, entries, unobservable, ops, case, max_examples, equivalent, runnable, parallel, modules,
                  tuple(args.mutate_module), cache_path, cache, kills, targets, hints_from,
                  library.driver_args(args.plugin, args.mutate_module, args.carrier))


def _incremental(args: argparse.Namespace, setup: _Setup):
    """What the incremental store lets this campaign reuse (harness.incremental.mutants.Reuse)."""
    from harness.incremental import mutants as reuse

    if setup.library:
        print("mutate: a library campaign reuses no saved outcome (every mutant runs)", flush=True)
        return reuse.Reuse()
    reused = reuse.Reuse.open(args.report_dir, setup.backend.name, setup.runnable, setup.ops, fresh=args.no_cache, settings={
        "seed": args.seed, "max_examples": setup.max_examples, "case": setup.case, "plugins": sorted(args.plugin)},
        timeout=args.timeout)
    print(reuse.summary_line(reused.plans), flush=True)
    print(f"mutate: sanity step of {', '.join(setup.ops)}: {reused.sanity_plan.describe()}", flush=True)
    if reused.saved_sanity is None:
        for name, (cases, _, saved_at) in sorted(reused.verified.items()):
            print(f"mutate: clean run of {name}: {len(cases)} case(s) passed in verify (verdict of {saved_at}) "
                  "are not run again", flush=True)
    return reused


def _header(args: argparse.Namespace, setup: _Setup) -> dict:
    from harness.mutation import campaign
    from reports import environment

    header = environment.header(setup.backend.describe(), seed=args.seed)
    header["max_examples"] = setup.max_examples
    if args.shard is not None:  # `report --merge` checks that every part of the same campaign is there
        header["shard"] = {"index": args.shard[0], "count": args.shard[1]}
    header["workers"] = {"count": setup.parallel, "reuse": not args.isolate}
    header["not_observable_here"] = [campaign.not_observable(e, setup.equivalent, setup.backend.name)
                                     for e in setup.unobservable]
    header["stale_equivalent_marks"] = campaign.stale_marks(setup.equivalent, setup.entries)
    if setup.library:
        header["library"] = {
            "modules": list(setup.library),
            "carriers": {f"{t.module}.{f}": {"op": c.op, "kernel": c.name} for t in setup.targets
                         for f, c in t.carriers.items()},
            "equivalent_file": args.equivalent,
            "unknown_equivalent_marks": sorted(set(setup.equivalent) - {e.name for e in setup.entries}),
        }
    return header


def _run_pool(args: argparse.Namespace, setup: _Setup, reused, header: dict,
              stop: Callable[[], bool] | None = None):
    """The sanity step and the mutants' jobs (harness.mutation.session); ``stop`` (the --tests
    clean run failed) ends them early, as an interruption would: nothing of this campaign could
    be scored by the tests (run() then exits 2)."""
    from harness.execution.progress import Progress
    from harness.mutation.session import CampaignSession

    looks = None
    if setup.backend.name == "cuda" and not args.no_memcheck and not setup.case:
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


def _estimate_line(args: argparse.Namespace, setup: _Setup, session) -> str:
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


def run(args: argparse.Namespace) -> int:
    """The campaign, then index.html, junit.xml and summary.md rendered from the report folder as
    verify renders them (a rendering failure warns; the exit status stays the campaign's)."""
    rc = _campaign(args)
    if not args.no_render and (Path(args.report_dir) / "mutation.json").is_file():
        from harness.cli import report as report_cli

        report_cli.write_after_run(args.report_dir)
    return rc


def _campaign(args: argparse.Namespace) -> int:
    backend = common.prepare(args)
    started = time.monotonic()
    setup = _set_up(args, backend)
    tests = _start_tests(args, setup)
    try:
        reused = _incremental(args, setup)
        header = _header(args, setup)
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


def _second_look(args: argparse.Namespace, setup: _Setup, header: dict, outcomes: list) -> str | None:
    """On a GPU, memcheck on the survivors; why the score is no verdict if it was interrupted."""
    from harness.mutation import memcheck_looks

    if setup.backend.name != "cuda" or args.no_memcheck:
        return None
    return memcheck_looks.second_look_of(
        outcomes, header, parallel=setup.parallel, driver_args=setup.driver_args,
        on_start=lambda n: print(f"mutate: memcheck second look at {n} survivor(s) ...", flush=True),
        on_done=lambda o: print(f"  {o.entry.name}: {o.status.value}" + (f" ({o.killed_by['message'][:120]})"
                                                                         if o.killed_by else ""), flush=True))


def _start_tests(args: argparse.Namespace, setup: _Setup):
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
