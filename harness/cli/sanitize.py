"""``python -m harness sanitize``: kernels under NVIDIA compute-sanitizer (GPU only): the project's,
and those of ``--plugin`` files.

For every project kernel and every tool (memcheck: out-of-bounds and misaligned accesses;
racecheck: shared-memory hazards inside a program, e.g. a reduction missing a barrier), a
child process runs ``compute-sanitizer --tool TOOL python -m harness sanitize --driver
OP/KERNEL`` (harness/mutation/sanitizer.py); the driver, here, runs the kernel forward and backward
through ``harness.run.runner.run_case`` on a few of the op's floor cases (several shapes, dtypes and
layouts), each announced on a ``driver: start`` line so a finding can be tied to its case.
"""

from __future__ import annotations

import argparse

from harness.cli import common
from harness.errors import UsageError
from harness.settings import DEFAULTS, current as current_settings
from vocabulary import Backend, EntryKind

NAME = "sanitize"
HELP = "run kernels (the project's and --plugin ones) under compute-sanitizer (memcheck, racecheck); needs a GPU"
EXAMPLE = "python -m harness sanitize --plugin my_kernels.py --select 'my_*'"
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
DEFAULT_TOOLS = "memcheck,racecheck"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tools", default=DEFAULT_TOOLS, help=f"comma-separated, from {','.join(TOOLS)} (default: {DEFAULT_TOOLS})")
    p.add_argument("--select", default="*", metavar="GLOB", help="glob on kernel names (default: *)")
    p.add_argument("--cases", type=common.positive_int, default=8, metavar="N", help="floor cases per kernel (default: 8)")
    p.add_argument("--timeout", type=float, default=DEFAULTS.sanitize_timeout_s, metavar="SECONDS",
                   help=f"per kernel and tool (default: {DEFAULTS.sanitize_timeout_s:g})")
    p.add_argument("--report-dir", default=common.DEFAULT_REPORT_DIR, metavar="DIR",
                   help=f"where sanitize.json goes (default: {common.DEFAULT_REPORT_DIR})")
    p.add_argument("--plugin", action="append", default=[], metavar="PATH",
                   help="Python file that registers kernels (repeatable): sanitize your own kernels too")
    p.add_argument("--mutants", action="store_true",
                   help="--select picks mutants (catalog and generated) instead of project kernels: how the "
                        "campaign shows a GPU survivor's out-of-bounds access")
    p.add_argument("--cover", action="store_true",
                   help="after the N spread cases, up to N more for the parameter values (shapes, dtypes, "
                        "ignored rows...) those miss: how the campaign's memcheck second look picks cases")
    p.add_argument("--mutate-module", action="append", default=[], metavar="MODULE",
                   help="with --mutants: the library mutants of this module (as mutate --mutate-module registers them)")
    p.add_argument("--carrier", default="*", metavar="GLOB", help="with --mutate-module: as mutate --carrier")
    p.add_argument("--case", metavar="CASE_ID",
                   help="run only this case (a case id from a report, e.g. a memcheck kill's) instead of --cases")
    p.add_argument("--driver", metavar="OP/KERNEL", help=argparse.SUPPRESS)  # the child's side


def pick_cases(cases: list, count: int, cover: bool = False) -> list:
    """``count`` cases spread evenly over the floor list (which walks dtypes, layouts and
    shapes); with ``cover``, then up to ``count`` more for the parameter values those left out.

    An even stride alone is not enough: when it is a multiple of the floor's shape cycle it
    keeps landing on the same few shapes and never reaches the edge ones (V = 1 with every row
    ignored, say), which is where a masked-out out-of-bounds access shows. Each extra pick is
    the case (earliest in floor order on a tie) with the most (parameter, value) pairs not yet
    covered, the seed aside; picking stops when nothing new is left."""
    if count <= 0 or not cases:
        return []
    step = max(1, len(cases) // count)
    chosen = list(cases[::step])[:count]

    def values(case) -> set:
        return {(k, v) for k, v in case.params if k != "seed"}

    if not cover:
        return chosen
    covered = set().union(*(values(c) for c in chosen))
    remaining = [c for c in cases if c not in chosen]
    for _ in range(count):
        best = max(remaining, key=lambda c: len(values(c) - covered), default=None)  # max keeps the first of equals
        if best is None or not values(best) - covered:
            break
        remaining.remove(best)
        chosen.append(best)
        covered |= values(best)
    return chosen


def _driver(target: str, count: int, mutants: bool = False, plugins: tuple[str, ...] = (), cover: bool = False,
            only: str | None = None, library: tuple[tuple[str, ...], str] = ((), "*")) -> int:
    from harness.run import backend as backends

    backend = backends.select("auto")  # the parent checked for a GPU; auto lets tests drive it on the CPU
    from harness.registry import loader
    from harness.cases.case import Case
    from harness.registry.registry import REGISTRY
    from vocabulary import Phase
    from harness.run.runner import run_case
    from harness.ops import layouts

    loader.load_all(plugins=plugins, library=library)
    if mutants and not library[0]:
        from harness.mutation import campaign

        campaign.load_mutants()
    op, _, name = target.partition("/")
    entry = REGISTRY.get(op, name)
    spec = REGISTRY.op(op)
    inside = []
    for c in [] if only else spec.floor_cases(backend=backend.name):
        if layouts.is_index_width(c):
            continue  # a storage of 2**31 elements (GBs): far over the sanitizers' case size
        args = spec.make_inputs(c, "cpu").args
        size = sum(a.numel() * a.element_size() for a in args if hasattr(a, "numel"))
        # within the contract, and of bounded size: the sanitizers slow kernels 10-100x
        if size <= current_settings().sanitize_max_case_bytes and not entry.contract.violations(args):
            inside.append(c)
    failed = 0
    for case in [Case.parse(only)] if only else pick_cases(inside, count, cover):
        print(f"driver: start {case.id}", flush=True)
        result = run_case(spec, entry, case, backend=backend.name, device=backend.device, phase=Phase.EXPLICIT)
        bad = [r.check for r in result.records if not r.passed]
        failed += bool(bad)
        if backend.name == Backend.CUDA:
            import torch

            torch.cuda.synchronize()  # a memory error is reported against this case, not the next
        print(f"driver: {case.id}: {'ok' if not bad else 'checks failed: ' + ', '.join(bad)}", flush=True)
    import torch

    if backend.name == Backend.CUDA:
        torch.cuda.synchronize()
    print(f"driver: done, {failed} case(s) with failed checks", flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.driver:
        return _driver(args.driver, args.cases, args.mutants, tuple(args.plugin), args.cover, args.case,
                       (tuple(args.mutate_module), args.carrier))
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown or not tools:
        raise UsageError(f"--tools {args.tools!r}: unknown {unknown or 'empty list'}; choose from {', '.join(TOOLS)}")
    from harness.cases.case import Case

    case_op = Case.parse(args.case).op if args.case else None  # a malformed id is a usage error (exit 2)
    from harness.mutation import sanitizer as sanitizers

    sanitizer = sanitizers.find()  # raises (exit 2) unless a GPU and compute-sanitizer are there
    from harness.run import backend as backends

    backend = backends.select("auto")
    from harness.registry import loader
    from harness.registry.registry import REGISTRY
    from reports import environment, writer

    library = (tuple(args.mutate_module), args.carrier)
    loader.load_all(plugins=args.plugin, library=library)
    if args.mutants:
        from harness.mutation import campaign

        if not args.mutate_module:
            campaign.load_mutants()
        entries = campaign.select(None, args.select)
    else:
        entries = REGISTRY.select(kind=EntryKind.KERNEL, pattern=args.select)  # the project's, and the plugins'
    if not entries:
        raise UsageError(f"--select {args.select!r} matches no {'mutant' if args.mutants else 'kernel'}")
    if case_op:
        entries = [e for e in entries if e.op == case_op]
        if not entries:
            raise UsageError(f"--case is a case of op {case_op!r}, but --select {args.select!r} matches no "
                             f"{'mutant' if args.mutants else 'kernel'} of that op")
    runs = []
    for entry in entries:
        for tool in tools:
            print(f"sanitize: {tool} on {entry.op}/{entry.name} ...", flush=True)
            r = sanitizers.run_one(sanitizer, entry.op, entry.name, tool, cases=args.cases, timeout=args.timeout,
                             mutants=args.mutants, plugins=tuple(args.plugin), cover=args.cover, case=args.case,
                             driver_args=tuple(w for m in args.mutate_module for w in ("--mutate-module", m))
                             + (("--carrier", args.carrier) if args.mutate_module and args.carrier != "*" else ()))
            runs.append(r)
            verdict = "clean" if r["clean"] else f"FINDINGS ({r['errors']} errors)" if r["errors"] else f"FAILED: {r['problem']}"
            print(f"  {verdict}  in {r['seconds']} s", flush=True)
            for line in r["findings"][:8]:
                print(f"    {line}")
    report = {**environment.header(backend.describe(), seed=None), "tools": tools, "cases_per_kernel": args.cases,
              "passed": all(r["clean"] for r in runs), "runs": runs}
    path = writer.write_json(args.report_dir, "sanitize.json", report)
    print(f"{'all kernels clean' if report['passed'] else 'sanitizer findings or failures'}; report: {path}")
    return 0 if report["passed"] else 1
