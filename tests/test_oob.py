"""harness.run.oob: out-of-bounds loads, stores and atomics in the Triton interpreter raise
OutOfBoundsAccess naming kernel, access, argument and offset; correct kernels stay silent.

Bug class targeted: dropped or wrong masks and offsets, which the bare interpreter turns
into silent garbage, heap corruption or a segfault.
"""

import dataclasses
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

from harness.run import oob
from harness.run.backend import current
from harness.registry.loader import load_plugin
from harness.registry.registry import REGISTRY, Contract
from harness.run.runner import run_case

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "tests/fixtures/oob_rmsnorm.py"

pytestmark = pytest.mark.skipif(not current().is_interpreter, reason="the guard is for the Triton interpreter only")


@pytest.fixture(scope="module", autouse=True)
def guard():
    was_active = oob.status().active
    status = oob.install()
    assert status.active, status.reason
    yield status
    if not was_active:
        oob.uninstall()


@triton.jit
def _copy(X, Y, N, BLOCK: tl.constexpr, MASK_LOAD: tl.constexpr, MASK_STORE: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if MASK_LOAD:
        x = tl.load(X + cols, mask=cols < N, other=0.0)
    else:
        x = tl.load(X + cols)
    if MASK_STORE:
        tl.store(Y + cols, x, mask=cols < N)
    else:
        tl.store(Y + cols, x)


@triton.jit
def _count(OUT, N, BLOCK: tl.constexpr, MASKED: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    if MASKED:
        tl.atomic_add(OUT + cols, 1.0, mask=cols < N)
    else:
        tl.atomic_add(OUT + cols, 1.0)


@triton.jit
def _read_before(X, Y, N, SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    tl.store(Y + cols, tl.load(X + cols - SHIFT, mask=mask), mask=mask)


def _copy_launch(mask_load, mask_store, n=10, block=8):
    x, y = torch.arange(n, dtype=torch.float32), torch.full((n,), -1.0)
    _copy[(triton.cdiv(n, block),)](x, y, n, BLOCK=block, MASK_LOAD=mask_load, MASK_STORE=mask_store)
    return x, y


def test_correct_masked_kernels_are_silent():
    x, y = _copy_launch(True, True)
    assert torch.equal(x, y)
    out = torch.zeros(5)
    _count[(3,)](out, 5, BLOCK=8, MASKED=True)
    assert torch.equal(out, torch.full((5,), 3.0))


def test_store_with_dropped_mask_names_the_argument_and_offset():
    with pytest.raises(oob.OutOfBoundsAccess) as info:
        _copy_launch(True, False)
    err = info.value
    assert (err.kernel, err.access, err.argument, err.arg_index, err.program) == ("_copy", "store", "Y", 1, (1, 0, 0))
    assert err.outside_by == 1
    msg = str(err)
    assert msg.startswith("store out of bounds in kernel _copy: program (1, 0, 0), 6 of 8 active lanes")
    assert "nearest argument 'Y' (arg 1, float32, spans 10 elements), offset +1..+6 elements past its end" in msg


def test_load_with_dropped_mask_is_reported_before_any_store():
    n = 10
    x, y = torch.arange(n, dtype=torch.float32), torch.full((n,), -1.0)
    expected = r"^load out of bounds in kernel _copy: program \(1, 0, 0\)"
    with pytest.raises(oob.OutOfBoundsAccess, match=expected) as info:
        _copy[(2,)](x, y, n, BLOCK=8, MASK_LOAD=False, MASK_STORE=True)
    assert info.value.argument == "X"
    assert torch.equal(y[:8], x[:8]) and torch.equal(y[8:], torch.full((2,), -1.0))  # program 1 never stored


def test_atomic_add_out_of_bounds():
    out = torch.zeros(5)
    expected = r"^atomic out of bounds in kernel _count: program \(0, 0, 0\), 3 of 8 active lanes"
    with pytest.raises(oob.OutOfBoundsAccess, match=expected) as info:
        _count[(1,)](out, 5, BLOCK=8, MASKED=False)
    assert (info.value.argument, info.value.outside_by) == ("OUT", 1)


def test_view_padding_counts_as_out_of_bounds():
    """A view's allowed bytes are its own span, not its storage: reading the storage's padding
    before an offset view (a missing storage offset) is reported."""
    storage = torch.full((20,), float("nan"))
    x = storage[5:15]
    x.copy_(torch.arange(10.0))
    y = torch.empty(10)
    _read_before[(1,)](x, y, 10, SHIFT=0, BLOCK=16)
    assert torch.equal(y, x)
    expected = r"nearest argument 'X' \(arg 0, float32, spans 10 elements\), 1\.\.2 elements before its start"
    with pytest.raises(oob.OutOfBoundsAccess, match=expected) as info:
        _read_before[(1,)](x, y, 10, SHIFT=2, BLOCK=16)
    assert info.value.outside_by == -1


def test_run_case_records_out_of_bounds_for_a_plugin_kernel():
    load_plugin(PLUGIN)
    spec = REGISTRY.op("rmsnorm")
    entry = REGISTRY.get("rmsnorm", "rmsnorm_store_mask_dropped")
    case = spec.case({"M": 3, "N": 100}, torch.float32, "contiguous", "normal", {"eps": 1e-6}, None, seed=7)
    run = run_case(spec, entry, case, backend="interpreter", device="cpu")
    failed = [r for r in run.records if not r.passed]
    assert [r.check for r in failed] == ["out_of_bounds"]
    assert "store out of bounds in kernel _forward_store_unmasked: program (2, 0, 0)" in failed[0].message
    assert "nearest argument 'Y' (arg 2" in failed[0].message
    power_of_two = spec.case({"M": 3, "N": 128}, torch.float32, "contiguous", "normal", {"eps": 1e-6}, None, seed=7)  # N == BLOCK: no bug
    assert run_case(spec, entry, power_of_two, backend="interpreter", device="cpu").passed


class _BackwardStoreUnmasked(torch.autograd.Function):
    """Correct forward in torch; the backward copies dx through ``_copy`` with its store mask dropped."""

    @staticmethod
    def forward(ctx, x, gamma, eps):
        ctx.save_for_backward(x, gamma)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma

    @staticmethod
    def backward(ctx, dy):
        src = dy.contiguous().flatten()
        dx = torch.empty_like(src)
        _copy[(triton.cdiv(src.numel(), 8),)](src, dx, src.numel(), BLOCK=8, MASK_LOAD=True, MASK_STORE=False)
        return dx.view_as(dy), dy.sum(0), None


def test_run_case_records_out_of_bounds_in_backward_and_in_the_contract_call():
    load_plugin(PLUGIN)
    spec = REGISTRY.op("rmsnorm")
    plugin_entry = REGISTRY.get("rmsnorm", "rmsnorm_store_mask_dropped")
    case = spec.case({"M": 3, "N": 100}, torch.float32, "contiguous", "normal", {"eps": 1e-6}, None, seed=7)
    backward = dataclasses.replace(plugin_entry, name="backward_store_unmasked", fn=_BackwardStoreUnmasked.apply)
    records = run_case(spec, backward, case, backend="interpreter", device="cpu").records
    assert [r.check for r in records if not r.passed] == ["out_of_bounds"]
    assert "store out of bounds in kernel _copy: program (37, 0, 0)" in records[-1].message
    fp16_only = dataclasses.replace(plugin_entry, contract=Contract(dtypes=(torch.float16,)))
    records = run_case(spec, fp16_only, case, backend="interpreter", device="cpu").records
    assert [r.check for r in records] == ["out_of_bounds"] and "_forward_store_unmasked" in records[0].message


def test_unavailable_internals_warn_once_and_install_nothing():
    real = sys.modules["triton.runtime.interpreter"]
    oob.uninstall()
    builder = type("InterpreterBuilder", (), {
        "create_masked_load": real.InterpreterBuilder.create_masked_load,
        "create_masked_store": real.InterpreterBuilder.create_masked_store,
    })
    executor = type("GridExecutor", (), {"__call__": real.GridExecutor.__call__})
    stand_in = types.SimpleNamespace(InterpreterBuilder=builder, GridExecutor=executor, interpreter_builder=builder(),
                                     InterpreterError=real.InterpreterError)
    try:
        missing = "no InterpreterBuilder.create_atomic_rmw; no GridExecutor._init_args_hst"
        with pytest.warns(oob.GuardUnavailable, match=missing):
            status = oob.install(stand_in)
        assert not status.active and "unavailable" in oob.status().reason
        assert vars(builder)["create_masked_load"] is real.InterpreterBuilder.create_masked_load  # nothing patched
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            oob.install(stand_in)  # the same reason is not warned twice
    finally:
        assert oob.install().active


def test_inactive_outside_the_interpreter(monkeypatch):
    oob.uninstall()
    try:
        monkeypatch.setenv("TRITON_INTERPRET", "0")
        status = oob.install()
        assert not status.active and "compute-sanitizer" in status.reason
    finally:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
        assert oob.install().active


def test_verify_cli_reports_out_of_bounds_without_crashing(tmp_path):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "verify", "--backend", "interpreter", "--plugin", PLUGIN,
         "--select", "rmsnorm_store_mask_dropped", "--max-examples", "0", "--report-dir", str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "verify.json").read_text())
    (kernel,) = report["kernels"]
    assert kernel["status"] == "ok" and not kernel["passed"]
    failed = {c["check"] for c in report["cases"] if not c["passed"]}
    assert failed == {"out_of_bounds"}
    assert all("nearest argument 'Y'" in c["message"] for c in report["cases"] if not c["passed"])


def test_the_nearest_argument_is_the_one_the_access_runs_past_even_when_another_starts_right_after():
    # a store past Y's end whose last bad lane ends exactly where X begins: both are 0 bytes away;
    # the report must name Y (the access ran past its end), not X (found flaky in a fresh clone)
    import numpy as np

    from harness.run.oob import _describe, _Launch, _Span

    y = _Span("Y", 2, "float32", 1000, 1400, 4)
    x = _Span("X", 0, "float32", 1400 + 4 * 8, 2000, 4)  # starts right after 8 bad lanes
    launch = _Launch("k", [x, y])
    bad = np.arange(1400, 1400 + 4 * 8, 4, dtype=np.int64)
    message, fields = _describe("store", launch, bad, bad, 4, (3,))
    assert fields["argument"] == "Y" and fields["outside_by"] == 1
    assert "nearest argument 'Y'" in message and "offset +1..+8 elements past its end" in message
