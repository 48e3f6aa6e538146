"""``python -m harness mutate``: the mutation campaign and its score gate.

Runs every selected mutant (hand-written catalog, generated from the kernels' source,
plugin ``register_mutant`` entries) against the same properties as ``verify``.
Exit status: 0 iff score >= --min-score; 1 if the score is lower, or if the campaign
refuses to score because the sanity step failed (the unmutated kernel fails its suite, or a
forced failure passes it; the report says which); 2 on bad usage.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

from harness.cli import common
from harness.errors import UsageError
from reports import jsonio

NAME = "mutate"
HELP = "mutation testing: run broken variants of the kernels and score how many the properties detect"
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


def _read_kill_cache(path: Path | None) -> dict:
    """The kill cache, or an empty one if it is off, missing or unreadable (it only orders cases)."""
    if path is None or not path.exists():
        return {"format": 1, "backends": {}}
    try:
        data = jsonio.loads(path.read_text())
        if data.get("format") == 1 and isinstance(data.get("backends"), dict):
            if not isinstance(data.get("memcheck", {}), dict):  # only orders work: a bad part is dropped
                del data["memcheck"]
            return data
    except (OSError, ValueError, AttributeError):
        pass
    print(f"mutate: warning: ignoring the unreadable kill cache {path}", file=sys.stderr)
    return {"format": 1, "backends": {}}


def _first_looks(cache: dict, runnable: list, backend: str, args: argparse.Namespace, parallel: int):
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
    return FirstLooks(cases, parallel=max(1, parallel), sanitizer=path)


def run(args: argparse.Namespace) -> int:
    backend = common.prepare(args)
    from harness.mutation import campaign
    from harness.mutation import memcheck_looks
    from harness.cases.case import Case
    from harness.execution.progress import Progress
    from reports import environment, mutation_report, writer

    started = time.monotonic()
    modules = campaign.load_mutants()
    entries = campaign.select(args.op, args.select)
    if not entries:
        known = len(campaign.select(args.op, "*"))
        raise UsageError(
            f"--select {args.select!r} matches no mutant{' of op ' + args.op if args.op else ''} "
            f"({known} registered); use a glob such as 'cat.*' or 'gen.rmsnorm_forward.*'"
        )
    unobservable = [e for e in entries if not campaign.observable_on(e, backend.name)]
    entries = [e for e in entries if campaign.observable_on(e, backend.name)]
    if not entries:
        raise UsageError(f"the selected mutants can only be detected on {unobservable[0].meta['backends']}, not on {backend.name}")
    ops = sorted({e.op for e in entries})  # before --shard: every part runs the sanity step of every op
    entries = [e for e in entries if common.in_part(e.name, args.shard)]
    case = Case.parse(args.case) if args.case else None
    if case:
        from harness.registry.registry import REGISTRY

        REGISTRY.op(case.op).validate_case(case)  # a malformed case is bad usage (exit 2)
        case = case.id
    max_examples = args.max_examples if args.max_examples is not None else DEFAULT_MAX_EXAMPLES[backend.name]
    if case:
        max_examples = 0
    equivalent = campaign.load_equivalent()
    runnable = [e for e in entries if not campaign.is_marked(e, equivalent, backend.name)]
    parallel = common.mutate_jobs(args.jobs, backend, max(2, len(runnable)))
    cache_path = None if args.kill_cache == "none" else Path(args.kill_cache or Path(args.report_dir) / "kill_cache.json")
    cache = _read_kill_cache(cache_path)
    kills = cache.setdefault("backends", {}).setdefault(backend.name, {})
    settings = dict(backend=backend.name, seed=args.seed, max_examples=max_examples, plugins=args.plugin,
                    parallel=parallel, modules=modules, reuse=not args.isolate, hints=campaign.floor_hints(kills))
    from harness.incremental import mutants as reuse, plan as incremental
    from harness.incremental.store import Store

    store = Store(args.report_dir, reuse=not args.no_cache)
    plans = incremental.mutant_plans(runnable, store, backend=backend.name, settings={
        "seed": args.seed, "max_examples": max_examples, "case": case, "plugins": sorted(args.plugin),
        "timeout": args.timeout})
    saved = reuse.saved_outcomes(plans, runnable)
    print(reuse.summary_line(plans), flush=True)
    sanity_plan = incremental.sanity_plan(ops, store, backend=backend.name, settings={
        "seed": args.seed, "max_examples": max_examples, "case": case, "plugins": sorted(args.plugin)})
    saved_sanity = reuse.saved_sanity(sanity_plan)
    print(f"mutate: sanity step of {', '.join(ops)}: {sanity_plan.describe()}", flush=True)
    header = environment.header(backend.describe(), seed=args.seed)
    header["max_examples"] = max_examples
    if args.shard is not None:  # `report --merge` checks that every part of the same campaign is there
        header["shard"] = {"index": args.shard[0], "count": args.shard[1]}
    header["workers"] = {"count": parallel, "reuse": not args.isolate}
    header["not_observable_here"] = [
        {"name": e.name, "backends": list(e.meta["backends"]), "description": e.description} for e in unobservable
    ]
    by_name = {e.name: e for e in entries}
    header["stale_equivalent_marks"] = sorted(
        n for n, mark in equivalent.items()
        if n in by_name and mark.get("fingerprint") not in (None, by_name[n].meta.get("fingerprint"))
    )

    # the sanity jobs counted as run_campaign builds them, from the same settings (an op may have several kernels)
    checks, _ = campaign.sanity_jobs(ops, shards=campaign.clean_shards(parallel, len(ops)), case=case,
                                     **{k: settings[k] for k in ("backend", "seed", "max_examples", "plugins", "modules")})
    if saved_sanity is not None:
        checks = []
    looks = _first_looks(cache, runnable, backend.name, args, parallel) if not case else None
    sanity_names = {j.kernel for j in checks}

    def classify(event) -> str:
        """What a finished job means for the campaign (the CI log's counts and its full lines)."""
        if event.kind == "skipped":
            return "not run"
        if event.job.kernel in sanity_names:
            forced = event.job.kernel.startswith(campaign.SANITY_PREFIX)
            return "sanity ok" if (event.failed > 0) == forced else "sanity failed"
        return "killed" if event.failed > 0 else "survived"

    with Progress("mutate", len(runnable) - len(saved) + len(checks), classify=classify,
                  shown=("survived", "sanity failed")) as progress:
        check, outcomes = campaign.run_campaign(entries, ops=ops, equivalent=equivalent, timeout=args.timeout, case=case,
                                                on_event=progress, first_looks=looks, saved=saved,
                                                saved_sanity=saved_sanity, **settings)
    if looks is not None:
        header["memcheck_first"] = looks.summary()
    sanity = {"passed": check.passed, "reason": check.reason, "clean_seconds": check.clean_seconds,
              "timeouts": check.timeouts, "runs": check.details}
    if saved_sanity is not None:
        sanity["reused_from"] = sanity_plan.saved["saved_at"]
    elif check.passed and not check.interrupted:
        reuse.save_sanity(store, sanity_plan, check)
    header["kill_cache"] = {"path": str(cache_path) if cache_path else None, "hinted": len(kills)}

    def finish(refused: str | None = None, *, scored: bool = True) -> dict:
        """Build, write and print mutation.json: scored with the outcomes, or refused with none;
        keep this campaign's kills for the next one. Ctrl-C waits until the files are written."""
        from harness.cli import outdir

        with outdir.signals_held():
            return _finish(refused, scored=scored)

    def _finish(refused: str | None, *, scored: bool) -> dict:
        kept = outcomes if scored else []
        per_gpu = collections.Counter(o.gpu for o in outcomes if o.gpu is not None)
        if per_gpu:  # how the campaign spread over the GPUs (each worker has one)
            header["workers"]["mutants_per_gpu"] = dict(sorted(per_gpu.items()))
        if cache_path is not None and kept:
            for o in kept:
                kills.pop(o.entry.name, None)
            kills.update(campaign.observed_kills(kept))
            if backend.name == "cuda":  # memcheck kills, for the next GPU campaign's first looks
                by_memcheck = cache.setdefault("memcheck", {})
                for o in kept:
                    by_memcheck.pop(o.entry.name, None)
                by_memcheck.update(memcheck_looks.memcheck_kills(kept))
            try:
                writer.write_json(cache_path.parent, cache_path.name, cache)
            except OSError as exc:
                print(f"mutate: warning: could not write the kill cache {cache_path}: {exc}", file=sys.stderr)
        report = mutation_report.build(
            header, mutants=[o.to_dict() for o in kept], score=campaign.score(kept) if scored else None,
            min_score=args.min_score, sanity=sanity, kill_matrix=campaign.kill_matrix(kept),
            minimal_cases=campaign.minimal_cases(kept), seconds=time.monotonic() - started, refused=refused,
        )
        path = writer.write_json(args.report_dir, "mutation.json", report)
        mutation_report.print_mutation(report, path=str(path), full=sys.stdout.isatty())
        return report

    if check.interrupted:  # what finished is kept; the score covers only that
        header.update(interrupted=True, not_run=check.not_run)
        finish(f"interrupted after {len(outcomes)} of {len(outcomes) + len(check.not_run)} mutants: the score "
               "covers only those and is not a verdict" + ("" if check.passed else f"; sanity: {check.reason}"))
        return 130
    if not check.passed:
        finish(check.reason, scored=False)
        return 1
    survivors = sum(o.status is campaign.Status.SURVIVED for o in outcomes)
    if backend.name == "cuda" and not args.no_memcheck and survivors:
        print(f"mutate: memcheck second look at {survivors} survivor(s) ...", flush=True)
        looked_from = time.monotonic()
        header["memcheck"] = memcheck_looks.second_look(
            outcomes, parallel=parallel,
            on_done=lambda o: print(f"  {o.entry.name}: {o.status.value}" + (f" ({o.killed_by['message'][:120]})" if o.killed_by else ""), flush=True))
        header["memcheck"]["seconds"] = round(time.monotonic() - looked_from, 1)
        if header["memcheck"].get("interrupted"):
            header.update(interrupted=True, not_run=[])
            finish(f"interrupted during the memcheck second look ({header['memcheck']['checked']} of {survivors} "
                   "survivors looked at): the score is not a verdict")
            return 130
    reuse.save(store, plans, outcomes)  # a complete campaign whose sanity step passed
    return 0 if finish()["passed"] else 1
