"""Running one kernel (or mutant) under NVIDIA compute-sanitizer, and reading its verdict.

Used by ``python -m harness sanitize`` (every selected kernel and tool) and by the mutation
campaign (a memcheck second look at GPU survivors). A child process runs
``compute-sanitizer --tool TOOL python -m harness sanitize --driver OP/KERNEL``; the driver
(harness/cli/sanitize.py) runs a few floor cases through ``harness.run.runner.run_case``. The
verdict comes from the sanitizer's summary line (``ERROR SUMMARY: N errors``, racecheck's
``RACECHECK SUMMARY: ... (N errors, M warnings)``) and the driver's end.

PyTorch's caching allocator is switched off in the child (PYTORCH_NO_CUDA_MEMORY_CACHING=1):
otherwise tensors are carved out of larger cached blocks and an out-of-bounds access that
lands in a neighbouring tensor is invisible to memcheck.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

from harness.settings import PROJECT_ROOT
from harness.errors import UsageError

ROOT = str(PROJECT_ROOT)
ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY:\s*(\d+)\s+hazards?\s+displayed\s*\((\d+)\s+errors?,\s*(\d+)\s+warnings?\)")
FINDING = re.compile(r"^=+\s+(Invalid|Race|Error|Uninitialized|Barrier|Misaligned|Warning|Program hit)", re.I)
MAX_FINDING_LINES = 20


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


def find() -> str:
    """compute-sanitizer's path; a UsageError (exit 2) saying what is missing otherwise."""
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        raise UsageError("sanitize needs a CUDA GPU (compute-sanitizer checks real kernel launches); "
                         "run it on a GPU machine with TRITON_INTERPRET unset")
    path = shutil.which("compute-sanitizer")
    if path is None:
        raise UsageError("compute-sanitizer is not on PATH: install the CUDA toolkit or add its bin/ "
                         "(e.g. /usr/local/cuda/bin) to PATH")
    return path


def kill(proc: subprocess.Popen) -> None:
    """The sanitizer and the driver it started (their own session: one signal reaches both)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_one(sanitizer: str, op: str, name: str, tool: str, *, cases: int, timeout: float, mutants: bool = False,
                 plugins: tuple[str, ...] = (), running: list | None = None, cover: bool = False,
                 case: str | None = None, driver_args: tuple[str, ...] = ()) -> dict:
    """One kernel (or mutant) under one compute-sanitizer tool: a child process drives ``cases``
    floor cases (with ``cover``, up to as many more for parameter values those miss), or with
    ``case`` that one case id; the verdict comes from the sanitizer's summary and the driver's
    end. The child is listed in ``running`` while it runs, so an interrupted caller can kill it
    (``kill``)."""
    env = dict(os.environ, PYTORCH_NO_CUDA_MEMORY_CACHING="1")
    env.pop("TRITON_INTERPRET", None)
    cmd = [sanitizer, "--tool", tool, "--print-limit", "100", sys.executable, "-m", "harness", "sanitize",
           "--driver", f"{op}/{name}", "--cases", str(cases), *(["--mutants"] if mutants else []), *(["--cover"] if cover else []),
           *(["--case", case] if case else []),
           *(arg for path in plugins for arg in ("--plugin", os.path.abspath(path))), *driver_args]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    if running is not None:
        running.append(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
        output, rc = out + err, proc.returncode
    except subprocess.TimeoutExpired:
        kill(proc)
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
        return find()
    except UsageError:
        return None
