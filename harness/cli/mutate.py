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
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Callable

from harness.cli import common
from harness.errors import UsageError
from reports import jsonio

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


def _first_looks(cache: dict, runnable: list, backend: str, args: argparse.Namespace, parallel: int,
                 driver_args: tuple[str, ...] = ()):
    """On a GPU, the memcheck first looks (harness.mutation.memcheck_looks) at the mutants the last
    campaign killed by memcheck, started now; None when there are none or no sanitizer."""
    if backend != "cuda" or args.no_memcheck:
        return None
    from harness.mutation import sanitizer
    from harness.mutation.memcheck_looks import FirstLooks

    known = cache.get("memcheck", {})
    cases = [(e, known[e.name]) for e in runnable if isinstance(known.get(e.name), str)]
    path = sanitizer.available() if cases else None
    if path is None:
        return None
    print(f"mutate: memcheck first look at {len(cases)} mutant(s) killed by memcheck last time ...", flush=True)
    more = {"driver_args": driver_args} if driver_args else {}
    return FirstLooks(cases, parallel=max(1, parallel), sanitizer=path, **more)


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

    def campaign_kw(self, args: argparse.Namespace) -> dict:
        from harness.mutation import campaign

        return dict(backend=self.backend.name, seed=args.seed, max_examples=self.max_examples, plugins=args.plugin,
                    parallel=self.parallel, modules=self.modules, reuse=not args.isolate,
                    hints=campaign.floor_hints(self.kills), library=self.library, carrier=args.carrier)


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
    entries = [e for e in entries if common.in_part(e.name, args.shard)]
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
    return _Setup(backend, entries, unobservable, ops, case, max_examples, equivalent, runnable, parallel, modules,
                  tuple(args.mutate_module), cache_path, cache, kills, targets, hints_from)


@dataclasses.dataclass
class _Reuse:
    """Outcomes and the sanity step reused from the incremental store (none for a library
    campaign, whose outcomes depend on code the store does not key)."""

    store: object = None
    plans: dict = dataclasses.field(default_factory=dict)
    saved: dict = dataclasses.field(default_factory=dict)
    sanity_plan: object = None
    saved_sanity: object = None


def _incremental(args: argparse.Namespace, setup: _Setup) -> _Reuse:
    if setup.library:
        print("mutate: a library campaign reuses no saved outcome (every mutant runs)", flush=True)
        return _Reuse()
    from harness.incremental import mutants as reuse, plan as incremental
    from harness.incremental.store import Store

    backend = setup.backend.name
    store = Store(args.report_dir, reuse=not args.no_cache)
    plans = incremental.mutant_plans(setup.runnable, store, backend=backend, settings={
        "seed": args.seed, "max_examples": setup.max_examples, "case": setup.case, "plugins": sorted(args.plugin),
        "timeout": args.timeout})
    saved = reuse.saved_outcomes(plans, setup.runnable)
    print(reuse.summary_line(plans), flush=True)
    sanity_plan = incremental.sanity_plan(setup.ops, store, backend=backend, settings={
        "seed": args.seed, "max_examples": setup.max_examples, "case": setup.case, "plugins": sorted(args.plugin)})
    print(f"mutate: sanity step of {', '.join(setup.ops)}: {sanity_plan.describe()}", flush=True)
    return _Reuse(store, plans, saved, sanity_plan, reuse.saved_sanity(sanity_plan))


def _not_observable(entry, setup: _Setup) -> dict:
    """A mutant listed apart: detectable only on other backends, or marked out of the cases' reach here."""
    from harness.mutation import campaign

    item = {"name": entry.name, "backends": list(entry.meta.get("backends", ())), "description": entry.description}
    mark = campaign.out_of_reach(entry, setup.equivalent, setup.backend.name)
    if mark is not None:
        item["out_of_reach"] = {"needs": str(mark.get("needs", "")).strip(), "reason": str(mark.get("reason", "")).strip()}
    return item


def _header(args: argparse.Namespace, setup: _Setup) -> dict:
    from reports import environment

    header = environment.header(setup.backend.describe(), seed=args.seed)
    header["max_examples"] = setup.max_examples
    if args.shard is not None:  # `report --merge` checks that every part of the same campaign is there
        header["shard"] = {"index": args.shard[0], "count": args.shard[1]}
    header["workers"] = {"count": setup.parallel, "reuse": not args.isolate}
    header["not_observable_here"] = [_not_observable(e, setup) for e in setup.unobservable]
    by_name = {e.name: e for e in setup.entries}
    header["stale_equivalent_marks"] = sorted(
        n for n, mark in setup.equivalent.items()
        if n in by_name and mark.get("fingerprint") not in (None, by_name[n].meta.get("fingerprint"))
    )
    if setup.library:
        header["library"] = {
            "modules": list(setup.library),
            "carriers": {f"{t.module}.{f}": {"op": c.op, "kernel": c.name} for t in setup.targets
                         for f, c in t.carriers.items()},
            "equivalent_file": args.equivalent,
            "unknown_equivalent_marks": sorted(n for n in setup.equivalent if n not in by_name),
        }
    return header


def _sanity_jobs(args: argparse.Namespace, setup: _Setup, reused: _Reuse) -> list:
    """The sanity jobs as run_campaign builds them, from the same settings (for the progress count)."""
    from harness.mutation import campaign

    if reused.saved_sanity is not None:
        return []
    settings = campaign.JobSettings(setup.backend.name, args.seed, setup.max_examples, tuple(args.plugin), setup.modules,
                                    setup.case, setup.library, args.carrier)
    checks, _ = campaign.sanity_jobs(setup.ops, settings, shards=campaign.clean_shards(setup.parallel, len(setup.ops)))
    return checks


def _progress_classes(checks: list):
    from harness.mutation import campaign

    sanity_names = {j.kernel for j in checks}

    def classify(event) -> str:
        """What a finished job means for the campaign (the CI log's counts and its full lines)."""
        if event.kind == "skipped":
            return "not run"
        if event.job.kernel in sanity_names:
            forced = event.job.kernel.startswith(campaign.SANITY_PREFIX)
            return "sanity ok" if (event.failed > 0) == forced else "sanity failed"
        return "killed" if event.failed > 0 else "survived"

    return classify


def _driver_args(args: argparse.Namespace, setup: _Setup) -> tuple[str, ...]:
    """What the sanitizer's driver needs to find a library mutant (plugins, modules, carrier)."""
    if not setup.library:
        return ()
    words = [w for path in args.plugin for w in ("--plugin", os.path.abspath(path))]
    words += [w for m in setup.library for w in ("--mutate-module", m)]
    return tuple(words + (["--carrier", args.carrier] if args.carrier != "*" else []))


def _run_pool(args: argparse.Namespace, setup: _Setup, reused: _Reuse, header: dict,
              stop: Callable[[], bool] | None = None):
    """The sanity step and the mutants' jobs; ``stop`` (the --tests clean run failed) ends them
    early, as an interruption would: nothing of this campaign could be scored by the tests."""
    from harness.mutation import campaign
    from harness.execution.progress import Progress

    checks = _sanity_jobs(args, setup, reused)
    looks = _first_looks(setup.cache, setup.runnable, setup.backend.name, args, setup.parallel,
                         _driver_args(args, setup)) if not setup.case else None
    with Progress("mutate", len(setup.runnable) - len(reused.saved) + len(checks), classify=_progress_classes(checks),
                  shown=("survived", "sanity failed")) as progress:
        def on_event(event) -> None:
            progress(event)
            if stop is not None and stop():
                raise KeyboardInterrupt  # the job pool stops as on Ctrl-C; run() then exits 2

        check, outcomes = campaign.run_campaign(setup.entries, ops=setup.ops, equivalent=setup.equivalent,
                                                timeout=args.timeout, case=setup.case, on_event=on_event,
                                                first_looks=looks, saved=reused.saved,
                                                saved_sanity=reused.saved_sanity, **setup.campaign_kw(args))
    if looks is not None:
        header["memcheck_first"] = looks.summary()
    return check, outcomes


def _sanity_record(check, reused: _Reuse) -> dict:
    from harness.incremental import mutants as reuse

    sanity = {"passed": check.passed, "reason": check.reason, "clean_seconds": check.clean_seconds,
              "timeouts": check.timeouts, "runs": check.details}
    if reused.saved_sanity is not None:
        sanity["reused_from"] = reused.sanity_plan.saved["saved_at"]
    elif check.passed and reused.store is not None:  # passed: every sanity job ended, even in an interrupted campaign
        reuse.save_sanity(reused.store, reused.sanity_plan, check)
    return sanity


def _keep_kills(setup: _Setup, kept: list) -> None:
    """This campaign's kills (and on a GPU its memcheck kills) for the next one's case order."""
    from harness.mutation import campaign, memcheck_looks
    from reports import writer

    if setup.cache_path is None or not kept:
        return
    for o in kept:
        setup.kills.pop(o.entry.name, None)
    setup.kills.update(campaign.observed_kills(kept))
    if setup.backend.name == "cuda":  # memcheck kills, for the next GPU campaign's first looks
        by_memcheck = setup.cache.setdefault("memcheck", {})
        for o in kept:
            by_memcheck.pop(o.entry.name, None)
        by_memcheck.update(memcheck_looks.memcheck_kills(kept))
    try:
        writer.write_json(setup.cache_path.parent, setup.cache_path.name, setup.cache)
    except OSError as exc:
        print(f"mutate: warning: could not write the kill cache {setup.cache_path}: {exc}", file=sys.stderr)


@dataclasses.dataclass
class _Report:
    """Writes mutation.json (and prints it) with what the campaign found."""

    args: argparse.Namespace
    setup: _Setup
    header: dict
    sanity: dict
    outcomes: list
    started: float
    tests: object = None  # harness.mutation.library_tests.Scoring, or None without --tests

    def finish(self, refused: str | None = None, *, scored: bool = True) -> dict:
        """Build, write and print mutation.json: scored with the outcomes, or refused with none;
        keep this campaign's kills for the next one. Ctrl-C waits until the files are written."""
        from harness.cli import outdir

        with outdir.signals_held():
            return self._finish(refused, scored)

    def _finish(self, refused: str | None, scored: bool) -> dict:
        from harness.mutation import campaign
        from reports import mutation_report, writer

        kept = self.outcomes if scored else []
        per_gpu = collections.Counter(o.gpu for o in self.outcomes if o.gpu is not None)
        if per_gpu:  # how the campaign spread over the GPUs (each worker has one)
            self.header["workers"]["mutants_per_gpu"] = dict(sorted(per_gpu.items()))
        self.header["kill_cache"] = {"path": str(self.setup.cache_path) if self.setup.cache_path else None,
                                     "hinted": len(self.setup.kills), "from": self.setup.hints_from}
        _keep_kills(self.setup, kept)
        report = mutation_report.build(
            self.header, mutants=[self._mutant(o) for o in kept], score=campaign.score(kept) if scored else None,
            min_score=self.args.min_score, sanity=self.sanity, kill_matrix=campaign.kill_matrix(kept),
            minimal_cases=campaign.minimal_cases(kept), seconds=time.monotonic() - self.started, refused=refused,
            tests=self.tests.summary() if self.tests is not None else None,
        )
        path = writer.write_json(self.args.report_dir, "mutation.json", report)
        mutation_report.print_mutation(report, path=str(path), full=sys.stdout.isatty())
        return report

    def _mutant(self, outcome) -> dict:
        data = outcome.to_dict()
        if self.setup.library:
            data.update(self.tests.of(outcome.entry.name) if self.tests is not None
                        else {"killed_by_tests": None, "tests_seconds": None})
        return data


def run(args: argparse.Namespace) -> int:
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
    report = _Report(args, setup, header, _sanity_record(check, reused), outcomes, started, tests)
    if check.interrupted:  # what finished is kept; the score covers only that
        header.update(interrupted=True, not_run=check.not_run)
        if check.passed:  # the next run resumes from the final outcomes
            _save_outcomes(reused, outcomes, partial=True)
        report.finish(f"interrupted after {len(outcomes)} of {len(outcomes) + len(check.not_run)} mutants: the score "
                      "covers only those and is not a verdict" + ("" if check.passed else f"; sanity: {check.reason}"))
        return 130
    if not check.passed:
        report.finish(check.reason, scored=False)
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
        report.finish(interrupted)
        return 130
    _save_outcomes(reused, outcomes)  # a complete campaign whose sanity step passed
    if tests is not None and not tests.wait_mutants():
        header.update(interrupted=True, not_run=[])
        report.finish(f"interrupted while the tests ran against the mutants ({tests.summary()['run']} run): "
                      "the scores are not a verdict")
        return 130
    return 0 if report.finish()["passed"] else 1


def _save_outcomes(reused: _Reuse, outcomes: list, *, partial: bool = False) -> None:
    if reused.store is not None:
        from harness.incremental import mutants as reuse

        reuse.save(reused.store, reused.plans, outcomes, partial=partial)


def _second_look(args: argparse.Namespace, setup: _Setup, header: dict, outcomes: list) -> str | None:
    """On a GPU, memcheck on the survivors; why the score is no verdict if it was interrupted."""
    from harness.mutation import campaign, memcheck_looks

    survivors = sum(o.status is campaign.Status.SURVIVED for o in outcomes)
    if setup.backend.name != "cuda" or args.no_memcheck or not survivors:
        return None
    print(f"mutate: memcheck second look at {survivors} survivor(s) ...", flush=True)
    looked_from = time.monotonic()
    header["memcheck"] = memcheck_looks.second_look(
        outcomes, parallel=setup.parallel, driver_args=_driver_args(args, setup),
        on_done=lambda o: print(f"  {o.entry.name}: {o.status.value}" + (f" ({o.killed_by['message'][:120]})" if o.killed_by else ""), flush=True))
    header["memcheck"]["seconds"] = round(time.monotonic() - looked_from, 1)
    if header["memcheck"].get("interrupted"):
        header.update(interrupted=True, not_run=[])
        return (f"interrupted during the memcheck second look ({header['memcheck']['checked']} of {survivors} "
                "survivors looked at): the score is not a verdict")
    return None


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
