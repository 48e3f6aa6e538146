"""Verify a kernel from a pytest test: ``assert_kernel("rmsnorm", my_rmsnorm, max_examples=50)``.

Runs the op's suite (floor cases, then hypothesis-generated cases, shrunk on failure) on ``fn``
inside the caller's process, with the same checks and tolerances as ``python -m harness verify``,
and raises a short AssertionError: what failed, the failures grouped by dtype, layout, value kind
and size, the worst element's allclose-style lines and a command that re-runs that case. Declared waivers (``contract=Contract(waive=...)``) do not fail the
test; a waiver whose check never failed warns (stale).

On a machine without a GPU kernels run through the Triton interpreter, which Triton chooses when
a kernel is decorated (``@triton.jit``, when its module is imported). Under pytest the plugin
(harness.pytest_plugin, installed with the project) sets ``TRITON_INTERPRET=1`` before any test
module is imported when torch sees no GPU; so does importing this module before triton. Where a
kernel was decorated before either, assert_kernel raises a UsageError saying to set it.
"""

from __future__ import annotations

import os
import warnings
from typing import Callable

from harness.registry.registry import Origin, Contract, KernelEntry, REGISTRY, _where, check_names
from harness.errors import RegistryError, UsageError
from harness.run import backend as backends
from harness.settings import current as current_settings
from vocabulary import Backend as BackendName, EntryKind

__all__ = ["assert_kernel", "prepare"]

if "triton" not in __import__("sys").modules:
    backends.interpret_without_gpu()


def prepare(backend: str = "auto") -> backends.Backend:
    """Choose the backend for this process (before triton is imported) and, on the interpreter,
    install the out-of-bounds guard: a bad access is then a failed check, not a crash of the caller."""
    __tracebackhide__ = True
    import sys

    if backend != BackendName.CUDA and "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1" and not _gpu():
        raise UsageError("no GPU here, so kernels run through the Triton interpreter, which Triton only chooses when it "
                         "is first imported, and triton is already imported: set TRITON_INTERPRET=1 in the environment "
                         "(TRITON_INTERPRET=1 python -m pytest ...)")
    be = backends.select(backend)
    if be.is_interpreter:
        from harness.run import interpreter_casts, oob

        oob.install()
        interpreter_casts.install()
    return be


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def entry_for(op: str, fn: Callable, *, name: str | None = None, contract: Contract | None = None) -> KernelEntry:
    """An unregistered KernelEntry for ``fn`` (tests may define many kernels with one name)."""
    __tracebackhide__ = True
    spec = REGISTRY.op(op)
    contract = contract or Contract()
    if not isinstance(contract, Contract):
        raise RegistryError(f"contract must be a harness.Contract, got {type(contract).__name__}")
    unknown = sorted(set(contract.waive) - set(spec.check_names()))
    if unknown:
        raise RegistryError(f"contract waives unknown check(s) {', '.join(unknown)} of op {op!r}; "
                            f"known checks: {', '.join(spec.check_names())}")
    check_names(contract, spec, f"kernel {name or getattr(fn, '__name__', 'kernel')!r}")
    return KernelEntry(op=op, name=name or getattr(fn, "__name__", "kernel"), fn=fn, contract=contract, kind=EntryKind.KERNEL,
                       origin=Origin.TEST, defined_at=_where(fn))


CASE_ENV = "HARNESS_CASE"  # a case id: assert_kernel re-runs that one case of its op (the printed repro)
QUICK_ENV = "HARNESS_QUICK"  # 1: every assert_kernel call runs its quick suite
MESSAGE_LINES = 6  # lines of the worst failure's message in the AssertionError


def assert_kernel(op: str, fn: Callable, *, max_examples: int | None = None, seed: int = 0,
                  contract: Contract | None = None, backend: str = "auto", case: str | None = None,
                  name: str | None = None, quick: bool | None = None) -> None:
    """Raise AssertionError unless ``fn`` passes the suite of ``op``.

    ``max_examples``: generated cases after the floor (default: verify's, 30 on the interpreter,
    200 on CUDA); ``seed``: the hypothesis seed; ``contract``: the inputs ``fn`` promises to handle
    and its declared deviations; ``backend``: auto|cuda|interpreter; ``case``: re-run one case id
    (also from the environment, ``HARNESS_CASE=ID``, as the printed repro does); ``quick``: only the
    floor's smallest case of each dtype and layout, no generated case (seconds on the interpreter;
    default: ``HARNESS_QUICK=1`` in the environment).

    The AssertionError stays short: what failed, the failures grouped by dtype, layout, value kind
    and size, the worst element's lines, and a command that re-runs the worst case.
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not the harness's source
    from harness.cases.case import Case
    from harness.run.suite import SuitePlan, run_suite
    from reports import console, failure_groups, verify_report

    be = prepare(backend)
    entry = entry_for(op, fn, name=name, contract=contract)
    spec = REGISTRY.op(op)
    case = case or _case_from_environment(op)
    only = Case.parse(case) if case else None
    if only is not None and only.op != op:
        raise RegistryError(f"case {case!r} is a {only.op!r} case, not {op!r}")
    quick = os.environ.get(QUICK_ENV) == "1" if quick is None else quick
    examples = current_settings().max_examples(be.name) if max_examples is None else max_examples
    with backends.quiet_interpreter_arithmetic():
        plan = SuitePlan(backend=be.name, seed=seed, max_examples=examples, only_case=only, quick=quick)
        records = [r.to_dict() for r in run_suite(spec, entry, plan, device=be.device)]
    summary = verify_report.kernel_summary(op, entry.name, records, waivers=entry.contract.waive,
                                           forward_only=entry.contract.forward_only)
    for check in summary["stale_waivers"]:
        warnings.warn(f"stale waiver: {entry.name} waives {check!r} ({entry.contract.waive[check]}) but it never "
                      "failed; remove it from Contract(waive=...)", stacklevel=2)
    failed = [r for r in records if not r["passed"]]
    if not failed:
        return
    worst = max(failed, key=lambda r: (r.get("err_ratio") is not None, r.get("err_ratio") or 0.0))
    worst = dict(worst, repro=_repro(fn, op, entry.name, worst["case_id"], be.name, seed))
    mode = ", quick" if quick else ""
    lines = [f"{entry.name} fails {op} on {summary['failed']} of {summary['cases']} "
             f"case(s) ({be.name}, seed {seed}{mode})",
             "  " + failure_groups.group_line(failed),
             "worst: " + console.failure_text(worst, max_lines=MESSAGE_LINES)]
    raise AssertionError("\n".join(lines))


def _case_from_environment(op: str) -> str | None:
    """``HARNESS_CASE``, when it names a case of ``op`` (a test may check several ops)."""
    case = os.environ.get(CASE_ENV, "").strip()
    return case if case.partition(":")[0] == op else None


def _repro(fn: Callable, op: str, name: str, case_id: str, backend: str, seed: int) -> str:
    """A command that re-runs one case of ``fn``, runnable as printed from any directory: verify's
    own repro line when ``fn`` is a kernel registered by a file; else, under pytest, the running
    test by its full path with ``HARNESS_CASE`` naming the case; else this script the same way."""
    import shlex
    import sys

    from harness.cases.case import Case, repro_command
    from harness.cases.command import absolute

    registered = _registered(fn)
    if registered:
        plugin, name = registered
        return repro_command(Case.parse(case_id), kernel=name, backend=backend, plugins=(plugin,))
    env = f"{CASE_ENV}={shlex.quote(case_id)}"
    nodeid = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    if nodeid:
        path, sep, rest = nodeid.partition("::")
        test = _caller_file(path)
        if test:
            return f"{env} " + shlex.join([sys.executable, "-m", "pytest", f"{test}{sep}{rest}"])
    if sys.argv and sys.argv[0] and os.path.isfile(sys.argv[0]):
        return f"{env} " + shlex.join([sys.executable, absolute(sys.argv[0]), *sys.argv[1:]])
    return f"assert_kernel({op!r}, {name}, seed={seed}, backend={backend!r}, case={case_id!r})"


def _registered(fn: Callable) -> tuple[str, str] | None:
    """The file that registers ``fn`` as a kernel and the name it registers, if one does
    (harness.register_kernel)."""
    from harness.settings import PROJECT_ROOT

    for entry in REGISTRY.select(kind=EntryKind.KERNEL):
        if entry.fn is fn:
            if entry.plugin:
                return entry.plugin, entry.name
            file = entry.defined_at.rpartition(":")[0]
            # a plugin imported by the test itself registers without the loader knowing its file
            if file and os.path.isfile(file) and not file.startswith(str(PROJECT_ROOT / "kernels")):
                return file, entry.name
    return None


def _caller_file(relative: str) -> str | None:
    """The full path of the test file ``relative`` (a pytest node id's path) among the callers."""
    import inspect

    for frame in inspect.stack(context=0):
        file = frame.filename
        if file.endswith(relative.replace("/", os.sep)) and os.path.isfile(file):
            return os.path.abspath(file)
    return None
