"""Device discipline, checked on a machine with no GPU.

On a GPU the inputs are CUDA tensors while torch's default device is the CPU: a tensor that the
harness makes without naming a device (``torch.full(shape, v)`` in an op's error model) lands on
the CPU, and adding it to a CUDA tensor raises there, and only there. Here the inputs are CPU
tensors while the default device is ``meta``: the same slip makes a meta tensor, and any mix of it
with the inputs raises (stricter than CUDA, which lets 0-dim CPU tensors mix). Every op's case
construction, oracle, error model (terms, magnitudes, rounded_terms), comparison and refilled-call
steps run this way on floor cases covering each of its dtypes, layouts and value kinds, through
``run_case`` with an in-process kernel that is the op's float64 reference rounded to the input
dtype (itself device-clean). The planted bug (the FLCE rounded-terms floor made without a device)
must fail here.
"""

from __future__ import annotations

import pytest
import torch

from harness.registry.registry import REGISTRY, Contract, KernelEntry, load_builtin_ops
from harness.run.inputs import inputs_on
from harness.run.runner import run_case

load_builtin_ops()
OPS = sorted(REGISTRY.ops)


def _sample(spec, limit: int = 14) -> list:
    """Floor cases that add a dtype, layout or value kind not seen yet, at most ``limit``."""
    seen, out = set(), []
    for case in spec.floor_cases(backend="interpreter"):
        keys = {("dtype", case.get("dtype")), ("layout", case.get("layout")), ("values", case.get("values"))}
        if keys - seen:
            seen |= keys
            out.append(case)
        if len(out) >= limit:
            break
    return out


def _reference_kernel(spec):
    """The op's own float64 reference on upcast inputs, rounded to the input dtype: a correct
    kernel that creates nothing on a device of its own choosing."""
    reference = spec.decl.reference

    def kernel(*args):
        dtype = next(a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
        out = reference(*(a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args))
        return tuple(o.to(dtype) for o in out) if isinstance(out, tuple) else out.to(dtype)

    return kernel


def _run_on_meta_default(spec, case):
    entry = KernelEntry(spec.name, "reference_kernel", _reference_kernel(spec), Contract(), "kernel", "test", __file__)
    with torch.device("meta"):
        return run_case(spec, entry, case, backend="interpreter", device="cpu")


@pytest.mark.parametrize("op", OPS)
def test_case_construction_places_every_tensor_on_the_device(op):
    """Every input and upstream gradient a case makes lands on the device asked for."""
    spec = REGISTRY.op(op)
    for case in _sample(spec):
        inputs = inputs_on(spec, case, "meta")
        tensors = [a for a in inputs.args if isinstance(a, torch.Tensor)]
        ups = inputs.upstream if isinstance(inputs.upstream, (tuple, list)) else (inputs.upstream,)
        tensors += [u for u in ups if isinstance(u, torch.Tensor)]
        assert tensors and all(t.device.type == "meta" for t in tensors), (case.id, [t.device for t in tensors])


@pytest.mark.parametrize("op", OPS)
def test_every_step_keeps_to_the_inputs_device(op):
    """The oracle, the error model, the comparisons and the refilled calls run with CPU inputs
    under a meta default device; a correct kernel passes every check there."""
    spec = REGISTRY.op(op)
    cases = _sample(spec)
    assert cases
    for case in cases:
        run = _run_on_meta_default(spec, case)
        failed = [f"{r.check}: {r.message[:300]}" for r in run.records if not r.passed]
        assert not failed, (case.id, failed)


def test_the_planted_device_bug_fails(monkeypatch):
    """The FLCE rounded terms made without a device (the bug a GPU showed as a crash) raise here."""
    import properties.ops.fused_linear_cross_entropy as declaration

    def planted(x, weight, upstream, tiny: float = 0.0):
        up = float(torch.as_tensor(upstream, dtype=torch.float64, device=x.device).abs().max())
        return (None, torch.full(x.shape, tiny * up, dtype=torch.float64),
                torch.full(weight.shape, tiny * up, dtype=torch.float64))

    spec = REGISTRY.op("fused_linear_cross_entropy")
    monkeypatch.setattr(declaration, "fused_linear_ce_rounded_gradients", planted)
    case = next(c for c in _sample(spec) if c["dtype"] != "float32")
    with pytest.raises(RuntimeError, match="device"):
        _run_on_meta_default(spec, case)
    monkeypatch.undo()  # the real one is back: the same case passes
    assert all(r.passed for r in _run_on_meta_default(spec, case).records)
