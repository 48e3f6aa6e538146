"""``python -m harness doctor``: is this machine able to verify kernels? Prove it by running one.

A GPU being listed is not proof that it works: the doctor initialises the chosen backend and
runs the project's RMSNorm forward and backward on a small input against the float64 oracle.
Then it lists versions, the device and the interpreter status, and for anything missing what
to do. Exit 0 when healthy, 1 otherwise (2 for bad usage).
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import shutil
import sys
import time

from harness.run.backend import BACKENDS
from vocabulary import Backend, EntryKind

NAME = "doctor"
HELP = "check the environment: backend, one real kernel run against the oracle, versions, what is missing"
EXAMPLE = "python -m harness doctor --backend interpreter"

# module -> (required?, what it is for, what to do when it is missing)
PACKAGES = {
    "torch": (True, "tensors, autograd", "run `make setup` (CPU: pip install torch==2.13.0)"),
    "triton": (True, "the kernels", "run `make setup` (pip install triton)"),
    "hypothesis": (True, "generated cases", "pip install 'hypothesis>=6.100'"),
    "pytest": (True, "make test", "pip install 'pytest>=8'"),
    "xdist": (True, "parallel tests (pytest-xdist)", "pip install 'pytest-xdist>=3.5'"),
    "rich": (True, "terminal reports", "pip install 'rich>=13'"),
    "numpy": (False, "the Triton interpreter", "pip install numpy"),
    "matplotlib": (False, "bench plots", "pip install matplotlib (bench then writes a PNG)"),
    "liger_kernel": (False, "bench's Liger-Kernel column", "pip install --no-deps liger-kernel==0.8.5"),
}
DISTRIBUTIONS = {"xdist": "pytest-xdist", "liger_kernel": "liger-kernel"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", default="auto", choices=BACKENDS, help="auto|cuda|interpreter (default: auto)")


class _Out:
    def __init__(self) -> None:
        self.problems = 0

    def line(self, status: str, text: str, fix: str = "") -> None:
        if status == "FAIL":
            self.problems += 1
        print(f"  {status:<4}  {text}" + (f"\n        -> {fix}" if fix else ""))


def _version(name: str) -> str | None:
    try:
        module = importlib.import_module(name)
    except Exception:  # any import failure means "not usable here"; its message is not needed
        return None
    version = getattr(module, "__version__", None)
    if version is None:
        from importlib import metadata

        try:
            version = metadata.version(DISTRIBUTIONS.get(name, name))
        except metadata.PackageNotFoundError:
            version = "installed"
    return str(version)


def _packages(out: _Out) -> bool:
    print("packages:")
    print(f"  ok    python {platform.python_version()} ({sys.executable})")
    required_ok = True
    for name, (required, purpose, fix) in PACKAGES.items():
        if name == "triton":
            continue  # imported only after the backend is chosen (TRITON_INTERPRET is read on import)
        version = _version(name)
        if version is not None:
            out.line("ok", f"{name} {version}  ({purpose})")
        elif required:
            required_ok = False
            out.line("FAIL", f"{name} is missing ({purpose})", fix)
        else:
            out.line("note", f"{name} is not installed (needed only for {purpose})", fix)
    return required_ok


def _backend(name: str, out: _Out):
    from harness.run import backend as backends
    from harness.errors import UsageError

    print("backend:")
    try:
        backend = backends.select(name)
    except UsageError as exc:
        out.line("FAIL", str(exc), "use --backend auto, or fix the GPU set-up (nvidia-smi, driver, CUDA torch wheel)")
        return None
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    out.line("ok", f"{backend.name} (TRITON_INTERPRET={'1' if interp else 'unset'}; tensors on {backend.device})")
    version = _version("triton")
    if version is None:
        out.line("FAIL", "triton cannot be imported", PACKAGES["triton"][2])
        return None
    out.line("ok", f"triton {version}")
    import torch

    if backend.name == Backend.CUDA:
        idx = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        out.line("ok", f"device {idx}: {props.name}, compute capability {props.major}.{props.minor}, "
                       f"{props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} SMs; "
                       f"{torch.cuda.device_count()} GPU(s) visible; torch built for CUDA {torch.version.cuda}")
    else:
        out.line("ok", f"device: CPU ({platform.machine()}, {os.cpu_count()} cores), kernels run in the Triton interpreter")
        gpu = "a CUDA GPU is visible but not used" if torch.cuda.is_available() else "no CUDA GPU visible"
        from harness.run import interpreter_casts

        fixed = ("the harness corrects the interpreter's " + "; ".join(interpreter_casts.CORRECTED)
                 + " (fp32 values, rounded to nearest even bf16, as a GPU computes them)") \
            if interpreter_casts.install() else "this Triton's interpreter internals are not the ones the harness " \
            "corrects: bf16 arithmetic on bf16 values gives garbage here; upcast loads to fp32"
        out.line("note", f"{gpu}; the interpreter cannot show races; {fixed}",
                 "bench and sanitize need a GPU (--backend cuda on a GPU machine)")
    return backend


def _computation(backend, out: _Out) -> None:
    """Each op's first project kernel on one small floor case, through the harness's own runner:
    the same checks and tolerances as verify."""
    from harness.registry.registry import REGISTRY, load_project_kernels, Origin
    from harness.run.runner import run_case

    print("one real computation per op:")
    try:
        load_project_kernels()
    except Exception as exc:  # a broken kernel module stops verify: say which and why
        out.line("FAIL", f"the project's kernels do not all load: {type(exc).__name__}: {exc}",
                 "fix that kernels/ module (verify imports every one of them)")
        return
    names = ", ".join(f"{e.op}/{e.name}" for e in REGISTRY.select(kind=EntryKind.KERNEL))
    out.line("ok", f"project kernels load: {names}")
    for op in sorted(REGISTRY.ops):
        project = [e for e in REGISTRY.select(op=op, kind=EntryKind.KERNEL) if e.origin is Origin.PROJECT]
        if project:
            _one_case(REGISTRY.op(op), project[0], backend, out, run_case)


def _one_case(spec, entry, backend, out: _Out, run_case) -> None:
    from vocabulary import Phase
    from harness.run import backend as backends

    # a case of a few thousand elements: big enough to span several blocks, quick on the interpreter
    case = min(spec.floor_cases(backend=backend.name), key=lambda c: abs(_case_size(c) - 4096))
    started = time.perf_counter()
    try:
        with backends.quiet_interpreter_arithmetic():
            result = run_case(spec, entry, case, backend=backend.name, device=backend.device, phase=Phase.EXPLICIT)
    except Exception as exc:  # whatever broke, the doctor reports it instead of a traceback
        out.line("FAIL", f"{entry.op}/{entry.name} raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                 f"run `python -m harness verify --op {entry.op} --backend {backend.name}` for the full error")
        return
    seconds = time.perf_counter() - started
    failed = [r for r in result.records if not r.passed]
    worst = max((r.err_ratio or 0.0 for r in result.records), default=0.0)
    if failed:
        first = failed[0]
        out.line("FAIL", f"{entry.op}/{entry.name} on {case.id}: {first.check} failed: {first.message.splitlines()[0]}",
                 "the kernel gives wrong results here: run `make verify` and read the report")
    else:
        out.line("ok", f"{entry.op}/{entry.name} on {case.id}: {len(result.records)} checks passed, "
                       f"worst error {worst:.2g} of the allowed ({seconds:.2f} s with compilation)")


def _case_size(case) -> int:
    size = 1
    for key, value in case.params:
        if len(key) == 1 and key.isupper() and isinstance(value, int):
            size *= value  # the symbolic dimensions (M, N, D, V, ...)
    return size


def _tools(backend, out: _Out) -> None:
    print("tools:")
    for tool, purpose in (("compute-sanitizer", "make sanitize"), ("nvidia-smi", "GPU status")):
        where = shutil.which(tool)
        if where:
            out.line("ok", f"{tool} at {where}")
        else:
            out.line("note", f"{tool} not on PATH (needed only for {purpose})",
                     "install the CUDA toolkit (it ships compute-sanitizer) on a GPU machine" if tool == "compute-sanitizer" else "")


def _caches(backend, out: _Out) -> None:
    """What makes the next gate fast: Triton's compiled kernels (GPU only) and the kill cache."""
    import json
    from pathlib import Path

    from harness.cli.common import DEFAULT_REPORT_DIR

    print("caches:")
    if backend is not None and backend.name == Backend.CUDA:
        triton_dir = Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")
        entries = sum(1 for _ in triton_dir.iterdir()) if triton_dir.is_dir() else 0
        if entries:
            out.line("ok", f"Triton cache {triton_dir}: {entries} compiled kernel entries")
        else:
            out.line("note", f"Triton cache {triton_dir} is empty: the first make verify compiles every kernel "
                             "and every mutant (minutes on an H200, docs/gpu-runs.md)",
                     "keep this directory between CI runs (a self-hosted runner keeps it by default)")
    kill_cache = Path(DEFAULT_REPORT_DIR) / "kill_cache.json"
    try:
        per_backend = json.loads(kill_cache.read_text()).get("backends", {})
        counts = ", ".join(f"{name}: {len(kills)} mutants" for name, kills in sorted(per_backend.items()))
        out.line("ok", f"kill cache {kill_cache}: {counts or 'empty'}")
    except (OSError, ValueError, AttributeError):
        out.line("note", f"no kill cache at {kill_cache}: the first campaign runs each mutant's floor in order",
                 "keep reports/out/kill_cache.json between CI runs (it only reorders cases; verdicts stay the same)")


def run(args: argparse.Namespace) -> int:
    out = _Out()
    print("harness doctor")
    packages_ok = _packages(out)
    backend = _backend(args.backend, out) if packages_ok or _version("torch") else None
    if backend is not None:
        _computation(backend, out)
    _tools(backend, out)
    _caches(backend, out)
    if backend is None and out.problems == 0:
        out.line("FAIL", "no backend could be prepared")
    healthy = out.problems == 0
    print("healthy: kernels can be verified here" if healthy else f"NOT healthy: {out.problems} problem(s) above, each with what to do")
    return 0 if healthy else 1
