"""What one ``mutate`` campaign runs, decided from the command line before anything runs
(``CampaignSetup``): the mutants (the project's, or a library's: harness.mutation.library) and
those observable here, the equivalence marks, the ``--shard`` part, the one case, the worker
slots, the kill cache; what the incremental store lets it reuse; mutation.json's header."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from harness.cases import shard
from harness.cli import common
from harness.errors import UsageError
from vocabulary import Backend

__all__ = ["CampaignSetup", "DEFAULT_MAX_EXAMPLES", "campaign_header", "reused_by", "selected", "set_up"]

DEFAULT_MAX_EXAMPLES = {Backend.INTERPRETER: 5, Backend.CUDA: 50}


@dataclasses.dataclass
class CampaignSetup:
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


def selected(args: argparse.Namespace, backend) -> tuple[list, list]:
    """The selected mutants observable on this backend, and those that are not."""
    from harness.mutation import campaign, library

    entries = campaign.select(args.op, args.select)
    if args.mutate_module:
        entries = library.mutants_of(entries)
    elif common.plugin_only(args):
        # --plugin alone: the mutants the plugin files register, not the project's too (--select or --with-project)
        entries = [e for e in entries if e.plugin is not None]
        if not entries:
            raise common.no_plugin_entries(args, "mutant", "mutate", " (a plugin's mutants are its register_mutant "
                                           "entries; to mutate the @triton.jit functions of a module its kernels call: "
                                           "--mutate-module MODULE)")
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


def set_up(args: argparse.Namespace, backend) -> CampaignSetup:
    from harness.mutation import campaign

    _check_library_options(args)
    modules, targets = _load_mutants(args)
    entries, unobservable = selected(args, backend)
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
        from harness.ops import layouts

        layouts.check_backend(Case.parse(case), backend.name)  # an index-width case needs a GPU (exit 2 elsewhere)
    max_examples = 0 if case else (args.max_examples if args.max_examples is not None else DEFAULT_MAX_EXAMPLES[backend.name])
    runnable = [e for e in entries if not campaign.is_marked(e, equivalent, backend.name)]
    parallel = common.mutate_jobs(args.jobs, backend, max(2, len(runnable)))
    cache_path = None if args.kill_cache == "none" else Path(args.kill_cache or Path(args.report_dir) / "kill_cache.json")
    from harness.mutation import kill_cache

    cache, hints_from = kill_cache.read(cache_path)
    kills = cache.setdefault("backends", {}).setdefault(backend.name, {})
    from harness.mutation import library

    return CampaignSetup(backend, entries, unobservable, ops, case, max_examples, equivalent, runnable, parallel, modules,
                  tuple(args.mutate_module), cache_path, cache, kills, targets, hints_from,
                  library.driver_args(args.plugin, args.mutate_module, args.carrier))


def reused_by(args: argparse.Namespace, setup: CampaignSetup):
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


def campaign_header(args: argparse.Namespace, setup: CampaignSetup) -> dict:
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
