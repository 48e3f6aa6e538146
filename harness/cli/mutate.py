"""``python -m harness mutate``: the mutation campaign and its score gate.

Runs every selected mutant (hand-written catalog, generated from the kernels' source,
plugin ``register_mutant`` entries) against the same properties as ``verify``; ``--plugin`` alone
selects the mutants the plugin files register (``--with-project`` or ``--select``: the project's too). With
``--mutate-module MODULE``, the mutants are those of a library's ``@triton.jit`` functions,
run through the ``--plugin`` kernels that call into it (harness.mutation.library), and
``--tests COMMAND`` scores the library's own tests against the same mutants
(harness.mutation.library_tests).
Exit status: 0 iff score >= --min-score; 1 if the score is lower, or if the campaign
refuses to score because the sanity step failed (the unmutated kernel fails its suite, or a
forced failure passes it; the report says which); 2 on bad usage, or when the tests command
fails on the unmutated library.

This module parses; the campaign's set-up is harness.mutation.setup, its run from start to exit
status harness.mutation.command (the pool: harness.mutation.session).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import common

NAME = "mutate"
HELP = "mutation testing: run broken variants of the kernels and score how many the checks detect"
EXAMPLE = "python -m harness mutate --op rmsnorm --select 'cat.*' --backend interpreter"


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
    common.add_with_project(p, verb="mutate", what="mutants")
    p.add_argument("--kill-cache", default=None, metavar="PATH|none",
                   help="where the cases that killed each mutant are kept between campaigns, to try them first "
                        "(only the floor's order changes; default: REPORT_DIR/kill_cache.json; none: off)")
    p.add_argument("--no-memcheck", action="store_true",
                   help="on a GPU, skip the compute-sanitizer memcheck looks (the first look at the mutants "
                        "memcheck killed last time, the second look at survivors)")
    p.add_argument("--no-schemata", action="store_true",
                   help="build every generated mutant alone (default: the generated mutants of a kernel module run "
                        "as branches of one module, its schema, one CUDA compile per key for all of them; "
                        "HARNESS_SCHEMATA=0 does the same)")
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


def run(args: argparse.Namespace) -> int:
    """The campaign, then index.html, junit.xml and summary.md rendered from the report folder as
    verify renders them (a rendering failure warns; the exit status stays the campaign's)."""
    from harness.mutation import command

    rc = command.campaign_exit(args)
    if not args.no_render and (Path(args.report_dir) / "mutation.json").is_file():
        from harness.cli import report as report_cli

        report_cli.write_after_run(args.report_dir)
    return rc
