"""Verify a kernel from a pytest test: ``assert_kernel("rmsnorm", my_rmsnorm, max_examples=50)``.

Runs the op's suite (floor cases, then hypothesis-generated cases, shrunk on failure) on ``fn``
inside the caller's process, with the same checks and tolerances as ``python -m harness verify``,
and raises AssertionError listing every failed check with its case id, the allclose-style
mismatch lines and a repro. Declared waivers (``contract=Contract(waive=...)``) do not fail the
test; a waiver whose check never failed warns (stale).

On a machine without a GPU kernels run through the Triton interpreter, which Triton chooses when
it is first imported: set ``TRITON_INTERPRET=1`` in the environment (``TRITON_INTERPRET=1 pytest``)
or call assert_kernel before anything imports triton; otherwise it raises a UsageError saying so.
"""

from __future__ import annotations

import os
import warnings
from typing import Callable

from harness.registry.registry import Origin, Contract, KernelEntry, REGISTRY, _where, check_names
from harness.errors import RegistryError, UsageError
from harness.run import backend as backends
from harness.settings import current as current_settings

__all__ = ["assert_kernel", "prepare"]



def prepare(backend: str = "auto") -> backends.Backend:
    """Choose the backend for this process (before triton is imported) and, on the interpreter,
    install the out-of-bounds guard: a bad access is then a failed check, not a crash of the caller."""
    import sys

    if backend != "cuda" and "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1" and not _gpu():
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
    spec = REGISTRY.op(op)
    contract = contract or Contract()
    if not isinstance(contract, Contract):
        raise RegistryError(f"contract must be a harness.Contract, got {type(contract).__name__}")
    unknown = sorted(set(contract.waive) - set(spec.check_names()))
    if unknown:
        raise RegistryError(f"contract waives unknown check(s) {', '.join(unknown)} of op {op!r}; "
                            f"known checks: {', '.join(spec.check_names())}")
    check_names(contract, spec, f"kernel {name or getattr(fn, '__name__', 'kernel')!r}")
    return KernelEntry(op=op, name=name or getattr(fn, "__name__", "kernel"), fn=fn, contract=contract, kind="kernel",
                       origin=Origin.TEST, defined_at=_where(fn))


def assert_kernel(op: str, fn: Callable, *, max_examples: int | None = None, seed: int = 0,
                  contract: Contract | None = None, backend: str = "auto", case: str | None = None,
                  name: str | None = None) -> None:
    """Raise AssertionError unless ``fn`` passes the suite of ``op``.

    ``max_examples``: generated cases after the floor (default: verify's, 30 on the interpreter,
    200 on CUDA); ``seed``: the hypothesis seed; ``contract``: the inputs ``fn`` promises to handle
    and its declared deviations; ``backend``: auto|cuda|interpreter; ``case``: re-run one case id
    (the repro printed with a failure).
    """
    from harness.cases.case import Case
    from harness.run.suite import run_suite
    from reports import console, verify_report

    be = prepare(backend)
    entry = entry_for(op, fn, name=name, contract=contract)
    spec = REGISTRY.op(op)
    only = Case.parse(case) if case else None
    if only is not None and only.op != op:
        raise RegistryError(f"case {case!r} is a {only.op!r} case, not {op!r}")
    examples = current_settings().max_examples(be.name) if max_examples is None else max_examples
    records = [r.to_dict() for r in run_suite(spec, entry, backend=be.name, device=be.device, seed=seed,
                                               max_examples=examples, only_case=only)]
    call = f"assert_kernel({op!r}, {entry.name}, seed={seed}, backend={be.name!r}, case=CASE_ID)"
    for r in records:  # fn is no plugin file: re-run it the way it was called
        r["repro"] = call.replace("CASE_ID", repr(r["case_id"]))
    summary = verify_report.kernel_summary(op, entry.name, records, waivers=entry.contract.waive,
                                           forward_only=entry.contract.forward_only)
    for check in summary["stale_waivers"]:
        warnings.warn(f"stale waiver: {entry.name} waives {check!r} ({entry.contract.waive[check]}) but it never "
                      "failed; remove it from Contract(waive=...)", stacklevel=2)
    failed = [r for r in records if not r["passed"]]
    if not failed:
        return
    lines = [f"{entry.name} fails {op}: {len(failed)} failed check(s) on {summary['failed']} of {summary['cases']} "
             f"case(s) ({be.name}, seed {seed})"]
    listed = current_settings().failures_listed
    lines += [console.failure_text(r) for r in failed[:listed]]
    if len(failed) > listed:
        lines.append(f"... and {len(failed) - listed} more failed checks")
    raise AssertionError("\n".join(lines))
