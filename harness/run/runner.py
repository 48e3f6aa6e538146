"""Run one kernel on one case and turn every check into a record.

Order per case: contract gate -> forward -> inputs unchanged -> backward -> inputs unchanged
-> output meta -> values against the float64 oracle -> repeatability.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

from harness.run import compile_clock
from harness.cases.case import Case, repro_command
from harness.run.oob import find_out_of_bounds
from harness.registry.opspec import Meta, OpInputs, OpSpec
from harness.record.case_record import CaseRecord
from harness.registry.registry import KernelEntry
from properties import checks

REPRO_BACKEND = {"interpreter": "interpreter", "cuda": "cuda"}


class CaseRun:
    """Collects the records of one (kernel, case) pair."""

    def __init__(self, spec: OpSpec, entry: KernelEntry, case: Case, inputs: OpInputs, backend: str, phase: str):
        self.spec, self.entry, self.case, self.inputs = spec, entry, case, inputs
        self.records: list[CaseRecord] = []
        self._common = dict(
            op=entry.op,
            kernel=entry.name,
            case_id=case.id,
            shape=[list(a.shape) for a in inputs.args if isinstance(a, torch.Tensor)],
            dtype=str(inputs.dtype).removeprefix("torch."),
            layout=inputs.layout,
            repro=repro_command(
                case, kernel=entry.name, backend=backend, plugins=(entry.plugin,) if entry.plugin else ()
            ),
            phase=phase,
        )

    def add(self, check: str, passed: bool, message: str, comparison=None) -> CaseRecord:
        fields = dict(self._common, check=check, passed=bool(passed), message=message)
        if comparison is not None:
            fields.update(
                max_abs_err=comparison.max_abs_err,
                max_rel_err=comparison.max_rel_err,
                atol=comparison.atol,
                rtol=comparison.rtol,
                mismatched=comparison.mismatched,
                worst_index=comparison.worst_index,
                err_ratio=comparison.err_ratio,
                numel=comparison.numel,
            )
        rec = CaseRecord(**fields)
        self.records.append(rec)
        return rec

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.records)


class _Phases:
    """Seconds spent per phase of one case: the kernel's calls (``kernel``: execution, and
    ``compile``: Triton compiling, or loading from its disk cache, on first launches; see
    harness.run.compile_clock), the oracle, the harness's checks. On CUDA the kernel phase ends
    with a synchronize, so asynchronous launches are not billed to the next phase."""

    def __init__(self, device: torch.device):
        compile_clock.install()
        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        self.seconds = {"kernel": 0.0, "compile": 0.0, "oracle": 0.0, "checks": 0.0}
        self._phase, self._since = "checks", time.perf_counter()
        self._compiled_at_start = compile_clock.seconds()

    def enter(self, phase: str) -> None:
        if self._phase == "kernel":
            self.sync()
        now = time.perf_counter()
        elapsed = now - self._since
        if self._phase == "kernel":
            compiling = min(elapsed, compile_clock.seconds() - self._compiled_at_start)
            self.seconds["compile"] += compiling
            elapsed -= compiling
        self.seconds[self._phase] += elapsed
        self._phase, self._since = phase, now
        self._compiled_at_start = compile_clock.seconds()

    def done(self) -> dict[str, float]:
        self.enter("checks")
        return {k: round(v, 4) for k, v in self.seconds.items()}


def _poison_allocator(device: torch.device, nbytes: int) -> None:
    """Fill memory the caching allocator will hand out next with NaN bytes (0xFF), so an
    output element a kernel forgets to write reads as NaN instead of a lucky zero."""
    if device.type != "cuda" or nbytes <= 0:
        return
    block = torch.empty(nbytes * 2 + 4096, dtype=torch.uint8, device=device)
    block.fill_(0xFF)
    del block


def _out_of_bounds(run: CaseRun, exc: BaseException | None) -> bool:
    """Record an out-of-bounds access (harness.run.oob) as its own failed check."""
    oob = find_out_of_bounds(exc)
    if oob is not None:
        run.add("out_of_bounds", False, str(oob))
    return oob is not None


def _call(fn: Callable, args: tuple, grad_wrt: tuple[int, ...]):
    leaves = list(args)
    for i in grad_wrt:
        leaves[i] = args[i].detach().requires_grad_(True)
    return leaves, fn(*leaves)


def _grads(out: Any, leaves: list, grad_wrt: tuple[int, ...], upstream: torch.Tensor | None):
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        raise TypeError("the output does not require grad: the kernel is not differentiable through autograd")
    return torch.autograd.grad(out, [leaves[i] for i in grad_wrt], grad_outputs=upstream, allow_unused=True)


def run_case(spec: OpSpec, entry: KernelEntry, case: Case, *, backend: str, device: str, phase: str = "floor") -> CaseRun:
    inputs = spec.make_inputs(case, device)
    run = CaseRun(spec, entry, case, inputs, backend, phase)
    named = [(f"arg{i}", a) for i, a in enumerate(inputs.args)] + [("upstream", inputs.upstream)]
    dev = torch.device(device)
    nbytes = sum(a.numel() * a.element_size() for a in inputs.args if isinstance(a, torch.Tensor))

    reasons = entry.contract.violations(inputs.args)
    if reasons:
        snap = checks.Snapshot(named)
        error = None
        try:
            _call(entry.fn, inputs.args, ())
        except Exception as exc:  # the kernel's rejection is the expected outcome here
            error = exc
        if not _out_of_bounds(run, error):
            run.add("contract", *checks.contract_rejection(error, reasons, snap))
        return run

    started = time.perf_counter()
    phases = _Phases(dev)
    snap = checks.Snapshot(named)
    fwd_name = spec.check_name(spec.forward_check, case)
    try:
        _poison_allocator(dev, nbytes)
        phases.enter("kernel")
        leaves, out = _call(entry.fn, inputs.args, inputs.grad_wrt)
    except Exception as exc:
        if not _out_of_bounds(run, exc):
            run.add(fwd_name, False, f"in-contract input, but the kernel raised {type(exc).__name__}: {exc}")
        return run
    phases.enter("checks")
    run.add("inputs_unchanged", *checks.inputs_unchanged(snap, "forward"))

    grads: tuple = ()
    grad_error = None
    if inputs.grad_wrt:
        try:
            _poison_allocator(dev, nbytes)
            phases.enter("kernel")
            grads = _grads(out, leaves, inputs.grad_wrt, inputs.upstream)
        except Exception as exc:
            if _out_of_bounds(run, exc):
                return run
            grad_error = f"backward raised {type(exc).__name__}: {exc}"
        else:
            phases.enter("checks")
            run.add("inputs_unchanged", *checks.inputs_unchanged(snap, "backward"))

    phases.enter("oracle")
    expected = spec.oracle(inputs)
    phases.enter("checks")
    fwd_meta = spec.forward_meta(inputs)
    metas = [(fwd_name, out, fwd_meta)]
    for pos, name, g in zip(inputs.grad_wrt, spec.grad_checks, grads or [None] * len(inputs.grad_wrt)):
        arg = inputs.args[pos]
        metas.append((name, g, Meta(tuple(arg.shape), arg.dtype)))

    meta_ok, meta_msgs = True, []
    for name, actual, meta in metas:
        if actual is None and grad_error is not None and name != fwd_name:
            continue
        ok, msg = checks.output_meta(name, actual, meta, dev)
        meta_ok &= ok
        meta_msgs.append(msg)
    run.add("output_meta", meta_ok, "; ".join(meta_msgs))

    for name, actual, meta in metas:
        check = spec.check_name(name, case)
        if actual is None:
            run.add(check, False, grad_error or f"{name}: no gradient returned (allow_unused gave None)")
            continue
        tol = spec.tolerance(check, case, meta.dtype)
        cmp = checks.values(actual, expected[name], meta.dtype, tol, expected.get(f"{name}_magnitude"))
        run.add(check, cmp.passed, cmp.message, cmp)

    if run.passed:
        try:
            phases.enter("kernel")
            leaves2, out2 = _call(entry.fn, inputs.args, inputs.grad_wrt if grads else ())
            grads2 = _grads(out2, leaves2, inputs.grad_wrt, inputs.upstream) if grads else ()
        except Exception as exc:
            run.add("repeatable", False, f"second run raised {type(exc).__name__}: {exc}")
        else:
            phases.enter("checks")
            names = [m[0] for m in metas]
            ok, msg = checks.repeatable([out, *grads], [out2, *grads2], names)
            if not ok and not entry.contract.deterministic:
                ok, msg = True, msg + " (allowed: the contract declares the kernel nondeterministic)"
            run.add("repeatable", ok, msg)
    timing = phases.done()
    for r in run.records:
        r.seconds = round(time.perf_counter() - started, 4)
    if run.records:
        run.records[0].timing = timing
    return run
