"""``python -m harness bench --op OP``: time an op's implementations side by side on a GPU.

The protocol, the memory measure and the ``bench/<op>.py`` interface are in harness/workflows/benchmark.py.
"""

from __future__ import annotations

import argparse

from harness.cli import common
from harness.errors import UsageError
from vocabulary import Backend

NAME = "bench"
HELP = "time an op's implementations against torch, torch.compile and Liger-Kernel (CUDA events, medians); needs a GPU"
EXAMPLE = "python -m harness bench --op rmsnorm"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--op", required=True, help="the op whose bench/<op>.py definition to run")
    p.add_argument("--quick", action="store_true", help="only the small workloads, 5 warm-up calls, 10 samples of 5 calls")
    p.add_argument("--select", default="*", metavar="GLOB", help="glob on implementation names (default: *)")
    p.add_argument("--report-dir", default=common.DEFAULT_REPORT_DIR, metavar="DIR",
                   help=f"where bench_<op>.json and bench_<op>.png go (default: {common.DEFAULT_REPORT_DIR})")


def run(args: argparse.Namespace) -> int:
    import os

    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        raise UsageError(
            "bench needs a CUDA GPU: timings in the Triton interpreter or on the CPU say nothing about "
            "kernel speed; run it on a GPU machine (unset TRITON_INTERPRET)"
        )
    from harness.run import backend as backends

    backend = backends.select(Backend.CUDA)
    from harness.workflows import benchmark
    from reports import environment, writer

    definition = benchmark.load_definition(args.op)

    def progress(row: dict) -> None:
        figure = row.get("error") or f"{row['median_us']:.1f} us"
        print(f"  {row['workload']:<18} {row['implementation']:<28} {row['mode']:<17} {figure}", flush=True)

    protocol = "quick" if args.quick else "the tutorial's protocol"
    print(f"bench {args.op} on {torch.cuda.get_device_name()} ({protocol})", flush=True)
    result = benchmark.run(definition, device=backend.device, clock=benchmark.CudaClock(),
                           quick=args.quick, select=args.select, on_result=progress)
    report = {**environment.header(backend.describe(), seed=None), "op": args.op, "quick": args.quick, **result}
    os.makedirs(args.report_dir, exist_ok=True)
    from reports import manifest

    manifest.record(args.report_dir, f"bench_{args.op}.png")  # matplotlib writes it: listed as the harness's first
    png = benchmark.plot(report, os.path.join(args.report_dir, f"bench_{args.op}.png"))
    report["plot"] = png
    path = writer.write_json(args.report_dir, f"bench_{args.op}.json", report)
    print(benchmark.format_table(report))
    print(f"report: {path}" + (f"; plot: {png}" if png else "; no plot (matplotlib is not installed)"))
    failed = [r for r in report["results"] if "error" in r]
    return 1 if failed else 0

