"""The plugin op ``cross_entropy_ext`` (examples/plugins/cross_entropy_ext.py): weights, label
smoothing, z-loss and softcapping declared from outside; torch passes, each dropped option fails."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from harness.registry.registry import REGISTRY, Contract, KernelEntry
from harness.run.runner import run_case

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "examples/plugins/cross_entropy_ext.py"


@pytest.fixture(scope="module")
def op():
    from harness.registry import loader

    if "cross_entropy_ext" not in REGISTRY.ops:
        loader.load_all(plugins=[PLUGIN])
    return REGISTRY.op("cross_entropy_ext")


def test_the_torch_kernel_passes_the_floor_and_generated_cases(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "harness", "verify", "--plugin", PLUGIN, "--op", "cross_entropy_ext",
                           "--select", "torch_cross_entropy_ext", "--backend", "interpreter", "--max-examples", "10",
                           "--report-dir", str(tmp_path), "--no-render"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (kernel,) = json.loads((tmp_path / "verify.json").read_text())["kernels"]
    assert kernel["passed"] and kernel["cases"] > 100 and {"loss", "dlogits", "all_ignored"} <= set(kernel["checks"])


def _z(x, target, ignore_index, naive=False):
    valid = target != ignore_index
    lse = torch.logsumexp(x, -1) if naive else torch.logsumexp(x.detach(), -1) + (
        torch.softmax(x.detach(), -1) * (x - x.detach())).sum(-1)  # value lse, gradient softmax
    return torch.where(valid, lse.square(), torch.zeros_like(lse)).sum() / valid.sum()


def _variant(drop):
    def kernel(logits, target, weight, ignore_index, label_smoothing, lse_square_scale, softcap):
        x = logits.float()
        if softcap and drop != "softcap":
            x = softcap * torch.tanh(x / softcap)
        w = None if drop == "weight" else weight.float()
        ls = 0.0 if drop == "smoothing" else label_smoothing
        if drop == "weights_sum":  # the weighted mean divided by the row count, not the weights' sum
            valid = target != ignore_index
            rows = F.cross_entropy(x, target, weight=w, ignore_index=ignore_index, label_smoothing=ls, reduction="none")
            loss = rows.sum() / valid.sum()
        else:
            loss = F.cross_entropy(x, target, weight=w, ignore_index=ignore_index, label_smoothing=ls)
        if lse_square_scale and drop != "z_loss":
            loss = loss + lse_square_scale * _z(x, target, ignore_index, naive=drop == "naive_lse")
        return loss.to(logits.dtype)

    return KernelEntry("cross_entropy_ext", f"drops_{drop}", kernel, Contract(), "kernel", "project", "here")


def _case(op, values=None, **scalars):
    """The first fp32 floor case with these scalar values (and value kind) and rows not ignored."""
    for c in op.floor_cases(backend="interpreter"):
        if c["dtype"] == "float32" and values in (None, c["values"]) and c.get("ignored") != "all" and int(c["N"]) > 2 \
                and all(c[k] == v for k, v in scalars.items()):
            return c
    raise AssertionError(f"no floor case with {values}, {scalars}")


@pytest.mark.parametrize("drop, values, scalars", [
    ("weight", "normal", {}),
    ("weights_sum", "normal", {}),
    ("smoothing", "normal", {"label_smoothing": 0.2}),
    ("z_loss", "normal", {"lse_square_scale": 1e-3}),
    ("softcap", None, {"softcap": 20.0}),
    # torch.logsumexp's backward on an fp32 row of -1e9: exp(x - lse) without the log(V) (run
    # through this op: the first torch kernel written for it failed so, 63x the allowed)
    ("naive_lse", "masked_rows", {"lse_square_scale": 1e-3}),
])
def test_each_dropped_option_fails(op, drop, values, scalars):
    case = _case(op, values, **scalars)
    run = run_case(op, _variant(drop), case, backend="interpreter", device="cpu")
    failed = {r.check for r in run.records if not r.passed}
    assert failed & {"loss", "dlogits"}, (case.id, [(r.check, r.message[:120]) for r in run.records])
    correct = run_case(op, REGISTRY.get("cross_entropy_ext", "torch_cross_entropy_ext"), case, backend="interpreter",
                       device="cpu")
    assert all(r.passed for r in correct.records), case.id
