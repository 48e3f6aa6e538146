"""Arguments and set-up shared by the subcommands that run kernels."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from harness.errors import UsageError
from harness.run import backend as backends
from vocabulary import Backend as BackendName

DEFAULT_REPORT_DIR = "reports/out"
REPRO_REPORT_DIR = "reports/repro"  # a one-case run (--case): beside a full run's reports, never over them


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def at_least_one(text: str) -> int:
    value = positive_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def shard_arg(text: str) -> tuple[int, int]:
    """``I/K``: this is CI job I (0-based) of K."""
    index, sep, count = text.partition("/")
    try:
        i, k = int(index), int(count)
    except ValueError:
        i = k = -1
    if not sep or k < 1 or not 0 <= i < k:
        raise argparse.ArgumentTypeError(f"expected I/K with 0 <= I < K (job I of K, e.g. 0/3), got {text!r}")
    return i, k


def add_shard(p: argparse.ArgumentParser, *, what: str) -> None:
    p.add_argument("--shard", type=shard_arg, default=None, metavar="I/K",
                   help=f"run only part I of K of the {what} (CI matrix jobs, 0-based); the K parts together are "
                        "exactly the unsharded run: `python -m harness report --merge DIR ...` joins their reports")


def jobs_arg(text: str) -> int | str:
    return text if text == "auto" else at_least_one(text)


def add_backend_and_report_dir(p: argparse.ArgumentParser, *, writes: str) -> None:
    """--backend and --report-dir, for the subcommands that run one fixed job."""
    p.add_argument("--backend", default="auto", help="auto|cuda|interpreter (default: auto)")
    p.add_argument("--report-dir", default=DEFAULT_REPORT_DIR, metavar="DIR",
                   help=f"where {writes} goes (default: {DEFAULT_REPORT_DIR})")


def add_selection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--op", help="only this op (default: every op)")
    p.add_argument("--select", default="*", metavar="GLOB", help="glob on kernel/mutant names; several separated by commas (default: *)")
    p.add_argument("--plugin", action="append", default=[], metavar="PATH", help="Python file that registers kernels (repeatable)")
    p.add_argument("--backend", default="auto", choices=None, help="auto|cuda|interpreter (default: auto)")
    p.add_argument("--max-examples", type=positive_int, default=None, metavar="N", help="hypothesis examples per kernel")
    p.add_argument("--seed", type=positive_int, default=0, metavar="N", help="hypothesis seed (default: 0)")
    p.add_argument("--report-dir", default=None, metavar="DIR",
                   help=f"where reports go (default: {DEFAULT_REPORT_DIR}; with --case {REPRO_REPORT_DIR})")
    p.add_argument("--jobs", type=jobs_arg, default=None, metavar="N|auto",
                   help="worker processes (default: the cores; for mutate on CUDA one per visible GPU); "
                        "auto: as many as the machine sustains (on CUDA half the cores, at least 2 per GPU)")


def add_with_project(p: argparse.ArgumentParser, *, verb: str, what: str) -> None:
    """--with-project: with --plugin, the project's kernels (or mutants) too; see ``plugin_only``."""
    p.add_argument("--with-project", action="store_true",
                   help=f"with --plugin: {verb} the project's {what} too (by default, --plugin without --select runs "
                        f"the plugin files' {what} only)")


def plugin_only(args: argparse.Namespace) -> bool:
    """--plugin alone (no --select, no --with-project): the command runs what the plugin files
    register, not the project's kernels or mutants too."""
    return bool(args.plugin) and args.select == "*" and not args.with_project


def no_plugin_entries(args: argparse.Namespace, what: str, verb: str, hint: str = "") -> UsageError:
    """The usage error of a ``plugin_only`` selection that found nothing."""
    return UsageError(f"--plugin {' '.join(args.plugin)} registers no {what}{' of op ' + args.op if args.op else ''}; "
                      f"add --with-project to {verb} the project's {what}s, or --select GLOB to choose {what}s{hint}")


def settle_report_dir(args: argparse.Namespace) -> None:
    """The default of add_selection's --report-dir: a --case repro writes to its own folder, so
    that it never replaces the report of the full run it came from."""
    if hasattr(args, "report_dir") and args.report_dir is None and hasattr(args, "case"):
        args.report_dir = REPRO_REPORT_DIR if args.case else DEFAULT_REPORT_DIR


def prepare(args: argparse.Namespace, *, described: bool = False) -> backends.Backend:
    """Choose the backend (before triton is imported), then load ops, kernels and plugins; with
    ``described``, learn them from a catalog child instead (harness.registry.catalog): this
    process then imports no user code."""
    backend = backends.select(args.backend)
    from harness.registry import catalog
    from harness.settings import PROJECT_ROOT

    if Path.cwd().resolve() != PROJECT_ROOT:  # installed, run elsewhere: workers start in PROJECT_ROOT
        args.plugin = [str(Path(p).resolve()) for p in args.plugin]
    if described:  # the child starts up while this process imports torch
        catalog.start(args.plugin, op=args.op, select=args.select, case=getattr(args, "case", None))
    from harness.registry import loader
    from harness.registry.registry import REGISTRY

    if described:
        from harness.incremental.plan import engine_closure

        engine_closure()  # the store key's engine part (cached), computed while the catalog child works
        catalog.load(args.plugin, op=args.op, select=args.select, case=getattr(args, "case", None))
    else:
        loader.load_all(plugins=args.plugin)
    if args.op is not None:
        REGISTRY.op(args.op)  # raises a RegistryError naming the known ops
    return backend


def default_jobs(backend: backends.Backend, n_jobs: int, *, shardable: bool = False) -> int:
    """Worker processes the machine sustains: at most one per job, unless the jobs can be
    sharded (verify) and the slots beyond one per job split them."""
    from harness.execution.workers import visible_gpus

    if backend.name == BackendName.CUDA:
        # a worker spends most of its time on the CPU (start-up, Python, compilation, case
        # set-up), so several share a GPU: half the cores, at least two per visible GPU
        gpus = max(1, len(visible_gpus()))
        slots = max(2 * gpus, (os.cpu_count() or 2) // 2)
    else:
        slots = os.cpu_count() or 1
    return max(1, slots if shardable else min(n_jobs, slots))


def mutate_jobs(requested: int | str | None, backend: backends.Backend, n_jobs: int) -> int:
    """mutate's --jobs: a number; ``auto`` (default_jobs); or, when not given, the machine's
    cores, and on CUDA one worker per visible GPU."""
    from harness.execution.workers import visible_gpus

    if isinstance(requested, int):
        return requested
    if requested == "auto":
        return default_jobs(backend, n_jobs)
    if backend.name == BackendName.CUDA:
        return max(1, len(visible_gpus()))
    return max(1, min(n_jobs, os.cpu_count() or 1))
