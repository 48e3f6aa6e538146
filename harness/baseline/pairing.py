"""The base kernel on the head's case: same inputs (a fresh copy), compared output by output.

Called by harness.run.runner after the head's value checks. Each value-check record of the
head (the forward output and each gradient) gets ``baseline``: ``{identical, max_ulps,
share_base, share_head}``, the share being the worst error as a share of the allowed
(err_ratio) against the same float64 oracle. A base that raises or returns no tensor gets
``{identical: False, max_ulps: None, error: ...}``: drift is information, never a verdict.
"""

from __future__ import annotations

from harness.baseline.drift import output_drift
from harness.run.inputs import inputs_on
from harness.run.kernel_host import KernelLost


def _base_outputs(steps, host):
    """(outputs in the order of ``metas``, or None; why not)."""
    inputs = inputs_on(steps.spec, steps.case, str(steps.dev))
    reply = host.forward(inputs.args, inputs.grad_wrt)
    if reply.error is not None:
        return None, f"the base kernel raised {reply.error.describe()}"
    outs = list(reply.value) if isinstance(reply.value, tuple) else [reply.value]  # one per output
    if inputs.grad_wrt:
        reply = host.backward(inputs.grad_wrt, inputs.upstream)
        if reply.error is not None:
            return None, f"the base kernel's backward raised {reply.error.describe()}"
        outs += list(reply.value)
    return outs, None


def against_base(steps, metas, expected: dict, host) -> None:
    """Attach the comparison with the base kernel to the head's value-check records."""
    try:
        outs, error = _base_outputs(steps, host)
    except KernelLost as lost:
        outs, error = None, f"the base kernel's process was lost: {lost.message}"
    by_check = {r.check: r for r in steps.run.records}
    for i, (name, actual, meta) in enumerate(metas):
        check = steps.spec.check_name(name, steps.case)
        record = by_check.get(check)
        if record is None:
            continue
        if outs is None or i >= len(outs):
            record.baseline = {"identical": False, "max_ulps": None, "share_base": None,
                               "share_head": record.err_ratio, "error": error or "the base kernel returned no such output"}
            continue
        base = outs[i]
        share_base = None
        if actual is not None and base is not None and getattr(base, "shape", None) == tuple(meta.shape):
            share_base = steps.compare(name, base, meta, expected)[1].err_ratio
        record.baseline = dict(output_drift(actual, base), share_base=share_base, share_head=record.err_ratio)
