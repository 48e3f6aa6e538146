"""Run one kernel on one case and turn every check into a record.

Order per case: contract gate -> forward -> inputs unchanged -> backward -> inputs unchanged
-> output meta -> values against the float64 oracle -> repeatability (and, for a kernel
declared nondeterministic, the second run's values) -> on floor and explicit cases, the same
storages refilled with the case's values at another seed between a call and its backward
(``_Steps.refill``): a forward under torch.no_grad (``no_grad``), and both calls' outputs and
gradients (``fresh_inputs``), each against its oracle, and the earlier output unchanged; for a
forward-only kernel, a forward with autograd enabled and one under torch.inference_mode (``grad_modes``).

The kernel is called through a host (harness.run.kernel_host): in this process for trusted
callers, in a kernel process of its own for the judge (harness.execution.worker). A host that
loses its kernel process (it exited, was killed by a signal, or hung) raises KernelLost; the
case then gets a failed ``crash`` or ``timeout`` record naming how it ended.

Length (over 400 lines): the steps of one case share its state (the inputs, the oracle's values, the
host, the records) in one ``_Steps`` object, and each later call (second run, refilled calls,
changed input) sits beside the comparison that judges it; split, each part would reach back
into that state.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import torch

from harness.cases.case import Case, repro_command
from harness.compare import nonfinite, rounding, tolerances
from harness.record import waivers
from vocabulary import Check, Phase
from vocabulary.records import CaseRecord
from harness.registry import inplace
from harness.registry.opspec import Meta, OpInputs, OpSpec, upstreams
from harness.registry.registry import KernelEntry
from harness.run.inputs import inputs_on
from harness.run.kernel_host import InProcessHost, KernelError, KernelLost, NotATensor, Refusal, Reply
from harness.ops import checks, layouts

NONDETERMINISTIC = "Contract(deterministic=False)"
FORWARD_ONLY = "Contract(forward_only=True)"
# how a backward says the output has none (torch's autograd, the kernel's own refusal)
NO_GRADIENT = ("does not require grad", "not differentiable", "NotImplementedError", "no gradient")
# the refilled call (``_Steps.refill``): on these phases only (a floor case costs one more forward
# and a forward and backward), with the case's values at seed + REFILL_SEED
REFILL_PHASES = (Phase.FLOOR, Phase.EXPLICIT)
REFILL_SEED = 7919
REFUSED = ("; a clean refusal (raised before any launch, inputs unchanged), still a failure while the limit is "
           "undeclared: the report names the declaration that accepts it")
STATE_HINT = ("the kernel answered from state kept between calls: a result or a converted weight cached by "
              "pointer or by shape, a workspace shared by calls")
# a later call that returned an output other than the case's own call did (none, another shape or dtype): not a
# value read from an earlier call, so not STATE_HINT
SHAPE_HINT = ("{names} missing or of another shape, dtype or device, where the case's own call returned it right: "
              "what a kernel returns must depend only on its inputs, never on torch.no_grad, on which inputs require "
              "grad or on the calls before it")


class CaseRun:
    """Collects the records of one (kernel, case) pair."""

    def __init__(self, spec: OpSpec, entry: KernelEntry, case: Case, inputs: OpInputs, backend: str, phase: Phase):
        self.spec, self.entry, self.case, self.inputs = spec, entry, case, inputs
        self.records: list[CaseRecord] = []
        self.lost: KernelLost | None = None  # the kernel process was lost during this case
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

    def add(self, check: Check | str, passed: bool, message: str, comparison=None, *,
            rounding_units: float | None = None) -> CaseRecord:
        """One check's record; a waived failure is marked at once (harness.record.waivers), so every
        gate of the case (repeat, the refilled calls) sees the kernel's declared verdict.
        ``rounding_units``: the worst error in roundings of the terms, for a failure made of value
        comparisons only (harness.compare.allclose); it sets the failure's class."""
        fields = dict(self._common, check=str(check), passed=bool(passed), message=message,
                      rounding_units=None if passed else rounding_units)
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
                rounding_units=None if comparison.passed else comparison.rounding_units,
                declared_precision=comparison.declared,
            )
        rec = CaseRecord(**fields)
        waivers.apply([rec], self.entry.contract.waive)
        self.records.append(rec)
        return rec

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.records)


class _Phases:
    """Seconds spent per phase of one case: the kernel's calls (``kernel``: execution, and
    ``compile``: Triton compiling, or loading from its disk cache, on first launches; both
    measured where the kernel runs, see harness.run.kernel_host), the oracle, the harness's
    checks (the hand-over of tensors between processes included)."""

    def __init__(self):
        self.seconds = {"kernel": 0.0, "compile": 0.0, "oracle": 0.0, "checks": 0.0}
        self.specializations: set[str] = set()  # Triton keys the case's calls launched (harness.run.specializations)
        self._phase, self._since = "checks", time.perf_counter()

    def enter(self, phase: str) -> None:
        now = time.perf_counter()
        self.seconds[self._phase] += now - self._since
        self._phase, self._since = phase, now

    def call(self, method: Callable[..., Reply], *args) -> Reply:
        self.enter("checks")
        started = time.perf_counter()
        reply = method(*args)
        wall = time.perf_counter() - started
        self.seconds["compile"] += reply.compile_s
        self.specializations.update(reply.specializations)
        self.seconds["kernel"] += max(0.0, reply.kernel_s - reply.compile_s)
        self.seconds["checks"] += max(0.0, wall - reply.kernel_s - reply.startup_s)  # start-up: "other" in reports
        self._since = time.perf_counter()
        return reply

    def done(self) -> dict[str, float]:
        self.enter("checks")
        return {k: round(v, 4) for k, v in self.seconds.items()}


def _out_of_bounds(run: CaseRun, error: KernelError | None) -> bool:
    """Record an out-of-bounds access (harness.run.oob) as its own failed check."""
    if error is not None and error.oob is not None:
        run.add(Check.OUT_OF_BOUNDS, False, error.oob)
        return True
    return False


def _describe_meta(meta: Meta) -> str:
    return f"a tensor of shape {tuple(meta.shape)} and dtype {str(meta.dtype).removeprefix('torch.')}"


class _Steps:
    """The steps of one case, each a short method; ``run`` collects their records."""

    def __init__(self, spec: OpSpec, entry: KernelEntry, case: Case, host, *, backend: str, device: str, phase: Phase,
                 base_host=None):
        self.spec, self.entry, self.case, self.host = spec, entry, case, host
        self.base_host = base_host  # the base revision's kernel (verify --baseline), or None
        self.inputs = inputs_on(spec, case, device)
        # Contract(inplace=...): each declared write, and the buffer's values after the call that wrote it
        self.writes = inplace.writes(entry.contract, spec)
        self.written: dict[str, torch.Tensor] = {}
        # the oracle reads a private copy: a kernel in another process holds the shared inputs
        self.reference = inputs_on(spec, case, device) if self.own_reference() else self.inputs
        self.last = self.inputs  # the tensors of the kernel's latest call (a second run may get its own)
        self.later = True  # the second run and the refilled calls (run_case's ``later``)
        self.run = CaseRun(spec, entry, case, self.inputs, backend, phase)
        self.dev = torch.device(device)
        ups = upstreams(self.inputs.upstream)
        self.named = [(f"arg{i}", a) for i, a in enumerate(self.inputs.args)] + [
            ("upstream" if j == 0 else f"upstream{j}", u) for j, u in enumerate(ups)]
        self.n_out = len(spec.output_checks) or 1  # outputs of the forward (a tuple where more than one)
        self.fwd_name = spec.check_name(spec.forward_check, case)
        self.phase, self.device = phase, device
        self.phases = _Phases()
        self.snap: checks.Snapshot | None = None
        # Contract(forward_only=True): no gradient is asked of the kernel
        self.grad_wrt = () if entry.contract.forward_only else self.inputs.grad_wrt

    def wrote_inputs(self) -> bool:
        """Whether the kernel changed its inputs, as its contract declares (Contract(inplace=...), or a
        waived inputs_unchanged)."""
        return bool(self.writes) or any(r.check == Check.INPUTS_UNCHANGED and r.waived for r in self.run.records)

    def own_reference(self) -> bool:
        """Whether the oracle gets inputs of its own: always where the kernel runs in another process;
        in this process (which trusts the kernel) where it declares writes into its inputs."""
        return getattr(self.host, "isolated", False) or bool(self.writes) \
            or Check.INPUTS_UNCHANGED in self.entry.contract.waive

    def keep_written(self, backward: bool) -> list[str]:
        """Copy the buffers the call just wrote by design; the labels of every buffer written so far."""
        for w in self.writes:
            if (w.output != inplace.FORWARD) == backward:
                buf = self.inputs.upstream if w.position is None else self.inputs.args[w.position]
                self.written[w.output] = buf.detach().clone() if isinstance(buf, torch.Tensor) else buf
        return [w.label for w in self.writes if w.output in self.written]

    def all(self) -> None:
        outside = getattr(self.spec, "outside_domain", None)  # an op declared from a reference (harness.ops.reference)
        reason = outside(self.reference) if outside is not None else None
        if reason is not None:  # the reference rejects the case: no verdict on the kernel (harness.reference.domain)
            from harness.reference.domain import OUTSIDE

            self.run.add(Check.CONTRACT, True, f"{OUTSIDE}: {reason}")
            return
        contract = self.entry.contract
        reasons = contract.violations(self.inputs.args, self.spec.input_names())
        if reasons:
            self.out_of_contract(reasons)
            return
        upstream = [r for u in upstreams(self.inputs.upstream) for r in contract.tensor_violations((), (), u)]
        if upstream:  # the kernel meets the upstream gradient only in its backward: nothing to reject
            self.run.add(Check.CONTRACT, True, f"out of contract, not run: {'; '.join(upstream)}")
            return
        out = self.forward()
        if out is None:
            return
        backward = self.backward()
        if backward is None:
            return
        grads, grad_error = backward
        expected = self.oracle(self.reference)
        metas = self.metas(out, grads)
        self.output_meta(metas, grad_error)
        self.values(metas, expected, grad_error)
        if self.base_host is not None:
            from harness.baseline.pairing import against_base

            against_base(self, metas, expected, self.base_host)
        if self.run.passed and self.later:
            self.repeat(metas, expected, grads)
        if self.run.passed and self.later:
            self.refill(grads, expected)
        if self.run.passed and self.later:
            self.grad_modes(expected)

    def out_of_contract(self, reasons: list[str]) -> None:
        snap = checks.Snapshot(self.named)
        error = self.phases.call(self.host.contract_call, self.inputs.args).error
        if not _out_of_bounds(self.run, error):
            self.run.add(Check.CONTRACT, *checks.contract_rejection(error, reasons, snap,
                                                                       self.entry.contract.self_limits))

    def forward(self) -> Any:
        self.snap = checks.Snapshot(self.named)
        reply = self.phases.call(self.host.forward, self.inputs.args, self.grad_wrt)
        if reply.error is not None:
            if not _out_of_bounds(self.run, reply.error) and not self.self_limited(reply):
                refused = checks.refusal(reply, self.snap)
                rec = self.run.add(self.fwd_name, False, f"in-contract input, but the kernel raised "
                                   f"{reply.error.describe()}" + checks.self_limit_problem(
                                       reply, self.snap, self.entry.contract.self_limits) + (REFUSED if refused else ""))
                rec.refused = refused
            return None
        problem = self.not_outputs(reply.value)
        if problem is not None:
            self.run.add(self.fwd_name, False, problem)
            return None
        self.run.add(Check.INPUTS_UNCHANGED, *checks.inputs_unchanged(self.snap, "forward", self.keep_written(False)))
        return reply.value

    def not_outputs(self, value: Any) -> str | None:
        """What is wrong with a forward's value: not a tensor, or for an op of several outputs not a
        tuple of one tensor per output (None: nothing)."""
        if self.spec.output_checks:
            want = ", ".join(f"{c}: {_describe_meta(m)}" for c, m in zip(self.spec.output_checks,
                                                                       self.spec.forward_metas(self.reference)))
            if isinstance(value, tuple) and len(value) == self.n_out:
                return None
            got = value.describe() if isinstance(value, NotATensor) else (
                f"a tuple of {len(value)} tensor(s)" if isinstance(value, tuple) else "a single tensor")
            return f"the kernel returned {got}, expected a tuple of {self.n_out} tensors ({want})"
        if isinstance(value, NotATensor) or not isinstance(value, torch.Tensor):
            got = value.describe() if isinstance(value, NotATensor) else (
                f"a tuple of {len(value)} tensor(s)" if isinstance(value, tuple) else type(value).__name__)
            return f"the kernel returned {got}, expected {_describe_meta(self.spec.forward_meta(self.reference))}"
        return None

    def self_limited(self, reply: Reply) -> bool:
        """A limit the kernel states itself (Contract(self_limits=True)): a rejection before any
        launch, its inputs unchanged, is out of contract for it, recorded with the kernel's words."""
        if not self.entry.contract.self_limits or checks.self_limit_problem(reply, self.snap, True):
            return False
        rec = self.run.add(Check.CONTRACT, True, f"out of contract by the kernel's own limit (Contract(self_limits=True)): "
                           f"it raised {reply.error.describe()[:300]} before launching anything, inputs unchanged")
        rec.self_limited = reply.error.describe()[:300]
        return True

    def backward(self) -> tuple[tuple, str | None] | None:
        """(gradients, why there are none); None if the case stops here (an out-of-bounds access)."""
        if not self.grad_wrt:
            return (), None
        reply = self.phases.call(self.host.backward, self.grad_wrt, self.inputs.upstream)
        if reply.error is not None:
            if _out_of_bounds(self.run, reply.error):
                return None
            said = f"backward raised {reply.error.describe()}"
            if any(s in reply.error.describe() for s in NO_GRADIENT):
                said += (f": the kernel returned an output with no gradient; a forward-only (inference) kernel "
                         f"declares {FORWARD_ONLY}")
            return (), said
        self.run.add(Check.INPUTS_UNCHANGED, *checks.inputs_unchanged(self.snap, "backward", self.keep_written(True)))
        return tuple(reply.value), None

    def output_metas(self, out) -> list[tuple[str, Any, Meta]]:
        """(check, value, meta) of each output: one, or one per output of an op of several (``out`` a
        tuple; None or anything else: each missing)."""
        if not self.spec.output_checks:
            return [(self.fwd_name, out, self.spec.forward_meta(self.reference))]
        outs = out if isinstance(out, tuple) and len(out) == self.n_out else (None,) * self.n_out
        names = (self.fwd_name, *self.spec.output_checks[1:])
        return list(zip(names, outs, self.spec.forward_metas(self.reference)))

    def metas(self, out, grads: tuple, grad_wrt: tuple[int, ...] | None = None) -> list[tuple[str, Any, Meta]]:
        """The outputs' and the gradients' (check, value, meta); ``grad_wrt``: the inputs whose
        gradients ``grads`` are (default: every one the case asks for)."""
        grad_wrt = self.grad_wrt if grad_wrt is None else grad_wrt
        names = dict(zip(self.grad_wrt, self.spec.grad_checks))
        metas = self.output_metas(out)
        for pos, g in zip(grad_wrt, grads or [None] * len(grad_wrt)):
            name, arg = names[pos], self.reference.args[pos]
            metas.append((name, g, Meta(tuple(arg.shape), arg.dtype)))
        return metas

    def waived(self, name: str) -> bool:
        """Whether the kernel's contract waives the value check of output ``name`` on this case."""
        return self.spec.check_name(name, self.case) in self.entry.contract.waive

    def given(self, grads: tuple) -> tuple[int, ...]:
        """The inputs whose gradient the later calls ask for: those the declaration says the kernel
        gives (its case's own backward returned, gradient check not waived). A waived gradient is a
        declared deviation (an inference kernel written before Contract(forward_only=True) waives
        every one): its later calls neither ask for it nor compare it; their forward still is."""
        if not grads:
            return ()
        return tuple(p for p, name in zip(self.grad_wrt, self.spec.grad_checks) if not self.waived(name))

    def output_meta(self, metas, grad_error: str | None) -> None:
        meta_ok, meta_msgs = True, []
        for name, actual, meta in metas:
            if actual is None and name != self.fwd_name and (grad_error is not None or self.waived(name)):
                continue  # a missing gradient is its own check's failure (or its declared deviation)
            ok, msg = checks.output_meta(name, actual, meta, self.dev)
            meta_ok &= ok
            meta_msgs.append(msg)
        self.run.add(Check.OUTPUT_META, meta_ok, "; ".join(meta_msgs))

    def oracle(self, reference: OpInputs) -> dict:
        """The float64 oracle's values, with their limits where an infinite input makes them NaN
        (harness.compare.nonfinite)."""
        self.phases.enter("oracle")
        expected = nonfinite.add_limits(self.spec.oracle(reference), reference, self.spec.oracle)
        self.phases.enter("checks")
        return expected

    def compare(self, name: str, actual, meta: Meta, expected: dict):
        check = self.spec.check_name(name, self.case)
        tol = self.spec.tolerance(check, self.case, meta.dtype)
        magnitude = expected.get(f"{name}_magnitude")
        precision = tolerances.for_check(self.entry.contract.precision, check)
        roundings, dtype = tolerances.declared_roundings(precision, self.inputs.dtype)
        if roundings:
            tol, magnitude = tolerances.declared_precision(tol, magnitude, expected.get(f"{name}_terms"), expected[name],
                                                           self.inputs.dtype, roundings, precision, dtype)
        cmp = checks.values(actual, expected[name], meta.dtype, tol, magnitude, expected.get(f"{name}_nan_ok"),
                            expected.get(f"{name}_limit"))
        if roundings:
            cmp.declared = tolerances.declaration(precision, roundings, dtype)
        return check, cmp

    def values(self, metas, expected: dict, grad_error: str | None) -> None:
        for name, actual, meta in metas:
            if actual is None:
                check = self.spec.check_name(name, self.case)
                self.run.add(check, False, grad_error or f"{name}: no gradient returned (allow_unused gave None)")
                continue
            check, cmp = self.compare(name, actual, meta, expected)
            why = None if cmp.passed else self.why(cmp)
            rec = self.run.add(check, cmp.passed, cmp.message + (f"\n{why}" if why else ""), cmp)
            if name == self.fwd_name:  # found where the kernel is loaded (harness.shortcut)
                rec.shortcut = self.entry.meta.get("shortcut") or None
        self.written_values(metas, expected)

    def why(self, cmp) -> str | None:
        """A reason the failure is beyond rounding, where one is recognised: a logsumexp absorbed by
        the inputs of a max-shifted row (harness.compare.rounding.absorbed_shift)."""
        if cmp.rounding_units is None or cmp.rounding_units <= 8:
            return None
        shifted = getattr(getattr(self.spec, "decl", None), "shift_by_max", ())
        names = self.spec.input_names()
        for name in shifted:
            x = self.inputs.args[names.index(name)]
            if cmp.worst_index is not None and len(cmp.worst_index) == x.dim():
                said = rounding.absorbed_shift(x, cmp.worst_index)
                if said:
                    return said
        return None

    def written_values(self, metas, expected: dict) -> None:
        """Each buffer the contract declares written, judged as the output it holds."""
        for w in self.writes:
            if w.output not in self.written:
                continue  # the call that writes it did not return
            name, _, meta = next(m for m in metas if m[0] == (self.fwd_name if w.output == inplace.FORWARD else w.output))
            check, said = self.spec.check_name(name, self.case), f"{name} written into {w.buffer} (Contract(inplace=...))"
            ok, problem = checks.output_meta(name, self.written[w.output], meta, self.dev)
            if not ok:
                self.run.add(check, False, f"{said}: the buffer is {problem}")
                continue
            check, cmp = self.compare(name, self.written[w.output], meta, expected)
            self.run.add(check, cmp.passed, f"{said}: {cmp.message}", cmp)

    def compare_all(self, metas, expected: dict, said: str, *, meta_first: bool = True) -> "_Verdicts":
        """Compare each output of a later call with its oracle (the refilled calls, a second run):
        what went wrong, the outputs missing or of another shape, dtype or device, and the worst
        error in roundings of the terms where every problem is a value comparison (None where one is
        not). An output whose check the contract waives is not compared, and is not asked to exist."""
        wrong, units, unlike = [], [], []
        meta_first = meta_first and Check.OUTPUT_META not in self.entry.contract.waive  # its waiver holds here too
        for name, actual, meta in metas:
            if actual is None and self.waived(name):
                continue
            if meta_first:
                ok, problem = checks.output_meta(name, actual, meta, self.dev)
            else:
                ok = isinstance(actual, torch.Tensor)
                problem = "" if ok else f"{name}: {said} returned {type(actual).__name__}"
            if ok and self.waived(name):
                continue  # a declared deviation of that value (Liger's 0 over all-ignored rows) holds here too
            if ok:
                check, cmp = self.compare(name, actual, meta, expected)
                ok, problem = cmp.passed, f"{check}: {cmp.message}"
                if not ok:
                    units.append(cmp.rounding_units)
            else:
                units.append(None)
                unlike.append(name)
            if not ok:
                wrong.append(problem)
        worst = None if not units or any(u is None for u in units) else max(units)
        return _Verdicts(wrong, worst, unlike)

    def asked(self, metas, grad_wrt: tuple[int, ...]) -> list:
        """``metas`` (the outputs, then every gradient) cut to the outputs and the gradients of ``grad_wrt``."""
        names = {name for p, name in zip(self.grad_wrt, self.spec.grad_checks) if p in grad_wrt}
        return metas[:self.n_out] + [m for m in metas[self.n_out:] if m[0] in names]

    def repeat(self, metas, expected: dict, grads: tuple) -> None:
        grad_wrt = self.given(grads)
        metas = self.asked(metas, grad_wrt)
        if self.wrote_inputs():
            # the kernel writes into its inputs by design (declared): the second run gets the same values
            # again, made afresh, rather than what the first run left there
            self.last = inputs_on(self.spec, self.case, self.device)
        reply = self.phases.call(self.host.repeat, self.last.args, grad_wrt, self.last.upstream)
        if reply.error is not None:
            if not _out_of_bounds(self.run, reply.error):
                self.run.add(Check.REPEATABLE, False, f"second run raised {reply.error.describe()}")
            return
        out2, grads2 = reply.value
        second = [m[1] for m in self.output_metas(out2)] + list(grads2)
        ok, msg = checks.repeatable([m[1] for m in metas], second, [m[0] for m in metas])
        if ok:
            self.run.add(Check.REPEATABLE, True, msg)
        elif msg.startswith(checks.UNLIKE_RUNS):  # no race, and no declaration accepts it
            self.run.add(Check.REPEATABLE, False, msg)
        elif self.entry.contract.deterministic:
            self.run.add(Check.REPEATABLE, False, msg + f". If the kernel is nondeterministic by design, declare "
                                                   f"{NONDETERMINISTIC}: its second run is then judged by the oracle")
        else:
            self.second_run_values(metas, second, expected, msg)

    def refill_case(self) -> Case | None:
        """The case with another seed (same shapes, dtype, layout and value kind), or None where
        the refilled call is not run: other phases, index-width cases (GBs), an op without seeds."""
        if self.phase not in REFILL_PHASES or "seed" not in dict(self.case.params):
            return None
        if self.case.get(layouts.WIDE) is not None or self.case.get("layout") in layouts.INDEX_WIDTH_LAYOUTS:
            return None
        return Case.of(self.case.op, **dict(dict(self.case.params), seed=new_seed(self.case)))

    def refill(self, grads: tuple, expected: dict) -> None:
        """Bug classes: a result cached by the inputs' pointers or shapes, state kept between calls
        (a workspace that the next forward overwrites before the earlier call's backward), an output
        buffer reused by the next call, an inference path (torch.no_grad) that differs."""
        case = self.refill_case()
        if case is None:
            return
        new = inputs_on(self.spec, case, self.device)
        if self.entry.contract.violations(new.args, self.spec.input_names(), new.upstream):
            return
        reference = inputs_on(self.spec, case, self.device) if self.own_reference() else new
        grad_wrt = self.given(grads)
        # B asks for one gradient alone where there are several (in turn with the seed): a backward that
        # skips or breaks one gradient when another input needs none (a frozen weight) shows there
        only = int(case["seed"]) % len(grad_wrt) if len(grad_wrt) > 1 else None
        grad_wrt_b = grad_wrt if only is None else (grad_wrt[only],)
        alone = None if only is None else dict(zip(self.grad_wrt, self.spec.grad_checks))[grad_wrt[only]]
        said = (f"a call A on copies of the inputs, then the same tensors refilled in place with the values of seed "
                f"{case['seed']} (call B{'' if alone is None else ', only ' + alone + ' asked for'}) "
                "before A's backward")
        if self.wrote_inputs():  # A starts from the case's values, not from what the kernel wrote there
            fresh = inputs_on(self.spec, self.case, self.device)
            with torch.no_grad():
                for mine, value in zip((*self.last.args, self.last.upstream), (*fresh.args, fresh.upstream)):
                    if isinstance(mine, torch.Tensor):
                        mine.copy_(value)
        reply = self.phases.call(self.host.refill, new.args, grad_wrt, grad_wrt_b, new.upstream, self.last.upstream)
        if reply.error is not None:
            if not _out_of_bounds(self.run, reply.error):
                self.run.add(Check.FRESH_INPUTS, False, f"{said}: the kernel raised {reply.error.describe()}")
            return
        inference, out_a, grads_a, out_b, grads_b, changed = reply.value
        expected_b = self.oracle(reference)
        msg, found = self._refilled(self.output_metas(inference), expected_b, f"{said}: B under torch.no_grad")
        self.run.add(Check.NO_GRAD, not found.wrong, msg, rounding_units=found.units)
        msg_a, found_a = self._refilled(self.metas(out_a, grads_a, grad_wrt), expected, "A")
        msg_b, found_b = self._refilled(self.metas(out_b, grads_b, grad_wrt_b), expected_b, "B")
        found, msg = found_a.join(found_b), f"{said}: {msg_a}; {msg_b}"
        if alone is not None and found_b.wrong and (not grads_b or grads_b[0] is None):
            self.run.add(Check.FRESH_INPUTS, False, f"{said}: B asked for {alone} alone (no other input requires grad, as "
                                                f"with a frozen input or weight) and got no gradient: the backward "
                                                f"computes {alone} only when another input requires grad ({msg_a})")
            return
        if changed:
            found.units, msg = None, (f"{said}: the output the kernel returned for the case's own call changed (the "
                                      f"kernel returns a buffer it writes again on a later call; each output must "
                                      f"be a tensor of its own). {msg}")
        ok = not found.wrong and not changed
        self.run.add(Check.FRESH_INPUTS, ok, msg if ok else f"{msg} ({found.hint(STATE_HINT, changed)})",
                     rounding_units=found.units)
        if ok and grad_wrt:
            self.changed_input(new, grad_wrt, expected)

    def grad_modes(self, expected: dict) -> None:
        """Bug class: a forward-only kernel right only in the mode it is usually called in (torch.no_grad
        for a KernelBench candidate): ``if torch.is_grad_enabled(): ...`` or a path taken under
        torch.inference_mode. On floor and explicit cases, a forward with autograd enabled and every
        float input requiring grad, and one under torch.inference_mode, each against the oracle. A
        kernel with gradients has its forward called with autograd and its refilled call B under
        torch.no_grad already; a kernel declared writing into its inputs is left out (a leaf that
        requires grad refuses an in-place write)."""
        if not self.entry.contract.forward_only or self.writes or self.refill_case() is None:
            return
        own = inputs_on(self.spec, self.case, self.device)  # the case's values: the refilled calls changed its tensors
        said, wrong, units = [], [], []
        for mode, words in (("autograd", "with autograd enabled (every float input requiring grad)"),
                            ("inference", "under torch.inference_mode")):
            reply = self.phases.call(self.host.grad_mode, own.args, mode)
            if reply.error is not None:
                if _out_of_bounds(self.run, reply.error):
                    return
                wrong.append(f"a forward {words} raised {reply.error.describe()}")
                units.append(None)
                continue
            msg, found = self._refilled(self.output_metas(reply.value), expected, f"a forward {words}")
            (wrong if found.wrong else said).append(msg)
            if found.wrong:
                units.append(found.units)
        worst = None if not units or None in units else max(units)
        hint = ("what a kernel returns must not depend on torch.is_grad_enabled(), torch.is_inference_mode_enabled() or "
                "on whether its inputs require grad")
        self.run.add(Check.GRAD_MODES, not wrong, "; ".join(wrong + said) + (f" ({hint})" if wrong else ""),
                     rounding_units=worst)

    def changed_input(self, new: OpInputs, grad_wrt: tuple[int, ...], expected: dict) -> None:
        """Bug class: an input kept for the backward outside ctx.save_for_backward (``ctx.x = x``), which
        a caller then changes in place (a residual ``x += ...``, an optimizer step on a weight): torch's
        version counter refuses the backward of a saved input; a kept reference silently gives the
        gradient of the changed values. Either the refusal or the gradient of the original inputs passes."""
        said = (f"a forward on copies of the inputs, the copies then changed in place to the values of seed "
                f"{new_seed(self.case)} before its backward")
        own = inputs_on(self.spec, self.case, self.device)  # the case's values again: refill changed the case's tensors
        reply = self.phases.call(self.host.changed_input, own.args, new.args, grad_wrt, own.upstream)
        if reply.error is not None:
            if not _out_of_bounds(self.run, reply.error):
                self.run.add(Check.CHANGED_INPUT, False, f"{said}: the kernel raised {reply.error.describe()}")
            return
        if isinstance(reply.value, Refusal):
            self.run.add(Check.CHANGED_INPUT, True, f"{said}: the backward refused the changed input (the same refusal "
                                                f"follows an in-place write of unchanged values): {reply.value.message}")
            return
        msg, found = self._refilled(self.metas(None, reply.value, grad_wrt)[self.n_out:], expected, "the gradients")
        hint = ("the backward read an input after the caller changed it: keep what the backward needs with "
                "ctx.save_for_backward (torch then refuses a changed input) or keep a copy")
        self.run.add(Check.CHANGED_INPUT, not found.wrong, f"{said}: {msg}" + (f" ({found.hint(hint)})" if found.wrong
                                                                                 else ""), rounding_units=found.units)

    def _refilled(self, metas, expected: dict, said: str) -> tuple[str, "_Verdicts"]:
        found = self.compare_all(metas, expected, said)
        if found.wrong:
            return f"{said} wrong: " + "; ".join(found.wrong), found
        return f"{said} within tolerance", found

    def second_run_values(self, metas, second: list, expected: dict, differ: str) -> None:
        """A kernel declared nondeterministic may differ between runs, never from the oracle."""
        found = self.compare_all([(name, actual, meta) for (name, _, meta), actual in zip(metas, second)], expected,
                                 "the second run", meta_first=False)
        if found.wrong:
            self.run.add(Check.REPEATABLE, False, f"the second run is wrong (two runs may differ bitwise under "
                                              f"{NONDETERMINISTIC}, but each must match the oracle): " + "; ".join(found.wrong),
                         rounding_units=found.units)
        else:
            self.run.add(Check.REPEATABLE, True, f"{differ} (allowed by {NONDETERMINISTIC}; the second run's values are "
                                             "within tolerance)")


@dataclasses.dataclass
class _Verdicts:
    """What a comparison of several outputs found: the problems, the worst error in roundings, the
    outputs missing or of another shape, dtype or device (``unlike``)."""

    wrong: list[str]
    units: float | None
    unlike: list[str] = dataclasses.field(default_factory=list)

    def join(self, other: "_Verdicts") -> "_Verdicts":
        """Both calls' findings; the worst error in roundings only where every problem of each is a value."""
        failed = [v.units for v in (self, other) if v.wrong]
        return _Verdicts(self.wrong + other.wrong, None if not failed or None in failed else max(failed),
                         self.unlike + other.unlike)

    def hint(self, values_hint: str, values_differ: bool = False) -> str:
        """The diagnosis of what differed: outputs unlike the case's own call's (SHAPE_HINT), values
        (``values_hint``, also where ``values_differ`` says so from elsewhere)."""
        said = [SHAPE_HINT.format(names=", ".join(self.unlike))] if self.unlike else []
        if values_differ or len(self.wrong) > len(self.unlike):
            said.append(values_hint)
        return "; ".join(said)


def new_seed(case: Case) -> int:
    """The seed of the refilled call's values."""
    return int(case["seed"]) + REFILL_SEED


def run_case(spec: OpSpec, entry: KernelEntry, case: Case, *, backend: str, device: str, phase: Phase = Phase.FLOOR,
             host=None, base_host=None, later: bool = True) -> CaseRun:
    """Every check of one case. ``host``: how the kernel is called (default: in this process);
    ``base_host``: a base revision's kernel, compared with it on the same inputs; ``later``: False
    leaves out the later calls (``repeatable`` and the refilled calls), which a mutation campaign
    runs only once the cheaper checks of every floor case have passed (harness.run.suite)."""
    started = time.perf_counter()
    steps = _Steps(spec, entry, case, host if host is not None else InProcessHost(entry.fn), backend=backend,
                   device=device, phase=phase, base_host=base_host)
    steps.later = later
    run = steps.run
    try:
        steps.all()
    except KernelLost as lost:
        run.lost = lost
        run.add(lost.check, False, f"{lost.message} (case {case.id})")
    timing = steps.phases.done()
    for r in run.records:
        r.seconds = round(time.perf_counter() - started, 4)
    if run.records:
        run.records[0].timing = timing
        run.records[0].specializations = sorted(steps.phases.specializations)
    return run
