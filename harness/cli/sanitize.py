"""``python -m harness sanitize``: kernels under NVIDIA compute-sanitizer (GPU only): the project's,
and those of ``--plugin`` files.

For every project kernel and every tool (memcheck: out-of-bounds and misaligned accesses;
racecheck: shared-memory hazards inside a program, e.g. a reduction missing a barrier), a
child process runs ``compute-sanitizer --tool TOOL python -m harness sanitize --driver
OP/KERNEL``; the driver runs the kernel forward and backward through ``harness.runner.run_case``
on a few of the op's floor cases (several shapes, dtypes and layouts). The verdict per kernel
and tool comes from the sanitizer's summary line (``ERROR SUMMARY: N errors``, racecheck's
``RACECHECK SUMMARY: ... (N errors, M warnings)``) and the driver's exit status.

PyTorch's caching allocator is switched off in the child (PYTORCH_NO_CUDA_MEMORY_CACHING=1):
otherwise tensors are carved out of larger cached blocks and an out-of-bounds access that
lands in a neighbouring tensor is invisible to memcheck.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from harness.cli import common
from harness.errors import UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NAME = "sanitize"
HELP = "run kernels (the project's and --plugin ones) under compute-sanitizer (memcheck, racecheck), per kernel; needs a GPU"
TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
DEFAULT_TOOLS = "memcheck,racecheck"
ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*(\d+)\s+hazards?\s+displayed\s*\((\d+)\s+errors?,\s*(\d+)\s+warnings?\)")
FINDING = re.compile(r"^=+\s+(Invalid|Race|Error|Uninitialized|Barrier|Misaligned|Warning|Program hit)", re.I)
MAX_FINDING_LINES = 20
MAX_CASE_BYTES = 8 * 2**20  # inputs per driven case


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tools", default=DEFAULT_TOOLS, help=f"comma-separated, from {','.join(TOOLS)} (default: {DEFAULT_TOOLS})")
    p.add_argument("--select", default="*", metavar="GLOB", help="glob on kernel names (default: *)")
    p.add_argument("--cases", type=common.positive_int, default=8, metavar="N", help="floor cases per kernel (default: 8)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS", help="per kernel and tool (default: 300)")
    p.add_argument("--report-dir", default=common.DEFAULT_REPORT_DIR, metavar="DIR",
                   help=f"where sanitize.json goes (default: {common.DEFAULT_REPORT_DIR})")
    p.add_argument("--plugin", action="append", default=[], metavar="PATH",
                   help="Python file that registers kernels (repeatable): sanitize your own kernels too")
    p.add_argument("--mutants", action="store_true",
                   help="--select picks mutants (catalog and generated) instead of project kernels: how the "
                        "campaign shows a GPU survivor's out-of-bounds access")
    p.add_argument("--driver", metavar="OP/KERNEL", help=argparse.SUPPRESS)  # the child's side


def parse_summary(tool: str, output: str) -> dict:
    """Errors and warnings from compute-sanitizer's output; ``errors`` is None when no summary was printed."""
    errors = warnings = None
    races = RACE_SUMMARY.findall(output)  # one summary per process the sanitizer followed: add them up
    if races:
        errors, warnings = sum(int(r[1]) for r in races), sum(int(r[2]) for r in races)
    else:
        found = ERROR_SUMMARY.findall(output)
        if found:
            errors = sum(int(n) for n in found)
    findings = [l.strip() for l in output.splitlines() if FINDING.match(l.strip()) and "SUMMARY" not in l]
    return {"errors": errors, "warnings": warnings, "findings": findings[:MAX_FINDING_LINES], "findings_total": len(findings)}


def pick_cases(cases: list, count: int) -> list:
    """``count`` cases spread evenly over the floor list (which walks dtypes, layouts and shapes)."""
    if count <= 0 or not cases:
        return []
    step = max(1, len(cases) // count)
    return list(cases[::step])[:count]


def _driver(target: str, count: int, mutants: bool = False, plugins: tuple[str, ...] = ()) -> int:
    from harness import backend as backends

    backend = backends.select("auto")  # the parent checked for a GPU; auto lets tests drive it on the CPU
    from harness import loader
    from harness.registry import REGISTRY
    from harness.runner import run_case

    loader.load_all(plugins=plugins)
    if mutants:
        from harness import campaign

        campaign.load_mutants()
    op, _, name = target.partition("/")
    entry = REGISTRY.get(op, name)
    spec = REGISTRY.op(op)
    inside = []
    for c in spec.floor_cases(backend=backend.name):
        args = spec.make_inputs(c, "cpu").args
        size = sum(a.numel() * a.element_size() for a in args if hasattr(a, "numel"))
        # within the contract, and of bounded size: the sanitizers slow kernels 10-100x
        if size <= MAX_CASE_BYTES and not entry.contract.violations(args):
            inside.append(c)
    failed = 0
    for case in pick_cases(inside, count):
        print(f"driver: start {case.id}", flush=True)
        result = run_case(spec, entry, case, backend=backend.name, device=backend.device, phase="explicit")
        bad = [r.check for r in result.records if not r.passed]
        failed += bool(bad)
        if backend.name == "cuda":
            import torch

            torch.cuda.synchronize()  # a memory error is reported against this case, not the next
        print(f"driver: {case.id}: {'ok' if not bad else 'checks failed: ' + ', '.join(bad)}", flush=True)
    import torch

    if backend.name == "cuda":
        torch.cuda.synchronize()
    print(f"driver: done, {failed} case(s) with failed checks", flush=True)
    return 0


def _sanitizer() -> str:
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        raise UsageError("sanitize needs a CUDA GPU (compute-sanitizer checks real kernel launches); "
                         "run it on a GPU machine with TRITON_INTERPRET unset")
    path = shutil.which("compute-sanitizer")
    if path is None:
        raise UsageError("compute-sanitizer is not on PATH: install the CUDA toolkit or add its bin/ "
                         "(e.g. /usr/local/cuda/bin) to PATH")
    return path


def _kill(proc: subprocess.Popen) -> None:
    """The sanitizer and the driver it started (their own session: one signal reaches both)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def sanitize_one(sanitizer: str, op: str, name: str, tool: str, *, cases: int, timeout: float, mutants: bool = False,
                 plugins: tuple[str, ...] = (), running: list | None = None) -> dict:
    """One kernel (or mutant) under one compute-sanitizer tool: a child process drives ``cases``
    floor cases; the verdict comes from the sanitizer's summary and the driver's end. The child
    is listed in ``running`` while it runs, so an interrupted caller can kill it (``_kill``)."""
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    env.pop("TRITON_INTERPRET", None)
    cmd = [sanitizer, "--tool", tool, "--print-limit", "100", sys.executable, "-m", "harness", "sanitize",
           "--driver", f"{op}/{name}", "--cases", str(cases), *(["--mutants"] if mutants else []),
           *(arg for path in plugins for arg in ("--plugin", os.path.abspath(path)))]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    if running is not None:
        running.append(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
        output, rc = out + err, proc.returncode
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        output, rc = (out or "") + (err or ""), None
    finally:
        if running is not None and proc in running:
            running.remove(proc)
    summary = parse_summary(tool, output)
    # a zero summary only counts if the driver reached its end (a crashed target can print one)
    finished = "driver: done" in output
    clean = rc == 0 and summary["errors"] == 0 and finished
    if rc is None:
        problem = f"timed out after {timeout:g} s"
    elif summary["errors"] is None:
        problem = f"no sanitizer summary in the output (exit status {rc})"
    elif rc != 0:
        problem = f"driver exit status {rc}"
    elif not finished:
        problem = "the driver did not finish its cases"
    else:
        problem = ""
    lines = output.splitlines()
    first_finding = next((i for i, l in enumerate(lines) if FINDING.match(l.strip()) and "SUMMARY" not in l), None)
    at_case = None
    if first_finding is not None:
        starts = [l.split("driver: start ", 1)[1] for l in lines[:first_finding] if l.startswith("driver: start ")]
        at_case = starts[-1] if starts else None
    return {
        "first_finding_case": at_case,
        "op": op, "kernel": name, "tool": tool, "clean": clean, "exit_status": rc,
        "problem": problem, **summary, "seconds": round(time.perf_counter() - started, 1),
        "command": " ".join(cmd), "driver_lines": [l for l in lines if l.startswith("driver:") and not l.startswith("driver: start ")],
        "output_tail": output[-3000:] if not clean else "",
    }


def available() -> str | None:
    """compute-sanitizer's path when a GPU and the tool are both there, else None."""
    try:
        return _sanitizer()
    except UsageError:
        return None


def run(args: argparse.Namespace) -> int:
    if args.driver:
        return _driver(args.driver, args.cases, args.mutants, tuple(args.plugin))
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown or not tools:
        raise UsageError(f"--tools {args.tools!r}: unknown {unknown or 'empty list'}; choose from {', '.join(TOOLS)}")
    sanitizer = _sanitizer()  # raises (exit 2) unless a GPU and compute-sanitizer are there
    from harness import backend as backends

    backend = backends.select("auto")
    from harness import loader
    from harness.registry import REGISTRY
    from reports import environment, writer

    loader.load_all(plugins=args.plugin)
    if args.mutants:
        from harness import campaign

        campaign.load_mutants()
        entries = campaign.select(None, args.select)
    else:
        entries = REGISTRY.select(kind="kernel", pattern=args.select)  # the project's, and the plugins'
    if not entries:
        raise UsageError(f"--select {args.select!r} matches no {'mutant' if args.mutants else 'kernel'}")
    runs = []
    for entry in entries:
        for tool in tools:
            print(f"sanitize: {tool} on {entry.op}/{entry.name} ...", flush=True)
            r = sanitize_one(sanitizer, entry.op, entry.name, tool, cases=args.cases, timeout=args.timeout,
                             mutants=args.mutants, plugins=tuple(args.plugin))
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
