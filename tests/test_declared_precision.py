"""Declared precision and contract rules: Contract(precision="input") and Contract(rule=...).

The kernels here are plain torch (no Triton: fast). ``rounded_logits`` materialises the logits
in the input dtype before the softmax, as Liger-Kernel's fused linear cross-entropy does: on
large fp16/bf16 logits its dW is off by several roundings of that dtype, a failure for a kernel
held to fp32 intermediates and within a declared input-dtype precision.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from harness import Contract, RegistryError
from harness.compare import tolerances
from harness.testing import assert_kernel

ROOT = Path(__file__).resolve().parent.parent
FLCE = "fused_linear_cross_entropy"
# floor cases of the op where the rounded logits move dW by more than fp32 intermediates allow
BF16_MIXED = f"{FLCE}:N=64,D=64,V=256,dtype=bfloat16,layout=col_sliced,values=mixed_scale,ignored=none,ignore_index=0,seed=2022"
FP16_LARGE = f"{FLCE}:N=64,D=64,V=256,dtype=float16,layout=transposed,values=large,ignored=some,ignore_index=-1,seed=2013"
DECLARED = Contract(precision="input")


def rounded_logits(x, weight, target, ignore_index=-100):
    logits = (x.float() @ weight.float().T).to(x.dtype).float()
    return F.cross_entropy(logits, target, ignore_index=ignore_index).to(x.dtype)


def rounded_logits_mean_over_all_rows(x, weight, target, ignore_index=-100):
    """The same, plus a logic error: the mean divides by every row, ignored ones included."""
    logits = (x.float() @ weight.float().T).to(x.dtype).float()
    return (F.cross_entropy(logits, target, ignore_index=ignore_index, reduction="sum") / x.shape[0]).to(x.dtype)


@pytest.mark.parametrize("case", [BF16_MIXED, FP16_LARGE])
def test_rounded_logits_fail_fp32_intermediates_and_name_the_declaration(case):
    with pytest.raises(AssertionError) as failed:
        assert_kernel(FLCE, rounded_logits, case=case, backend="interpreter")
    text = str(failed.value)
    assert "dweight" in text and "a precision choice at most" in text
    assert "Contract(precision='input')" in text


@pytest.mark.parametrize("case", [BF16_MIXED, FP16_LARGE])
def test_rounded_logits_pass_under_the_declared_precision(case):
    assert_kernel(FLCE, rounded_logits, case=case, backend="interpreter", contract=DECLARED)


def test_the_declaration_does_not_hide_a_logic_error():
    with pytest.raises(AssertionError, match="dweight|loss"):
        assert_kernel(FLCE, rounded_logits_mean_over_all_rows, case=FP16_LARGE, backend="interpreter", contract=DECLARED)


def test_declared_precision_leaves_fp32_alone_and_widens_by_8_roundings():
    e = torch.ones(3, dtype=torch.float64)
    fp32 = tolerances.Tolerance(2.0**-126, 2.0**-23, "r")
    assert tolerances.declared_precision(fp32, e, e, e, torch.float32) == (fp32, e)
    rounding = tolerances.Tolerance(1e-9, 1e-9, "r")
    bf16, allowance = tolerances.declared_precision(rounding, e * 0.5, None, e, torch.bfloat16)
    assert bf16.rtol == 8 * 2.0**-8 and bf16.terms_rtol == 1.0 and "precision='input'" in bf16.why
    assert torch.allclose(allowance, 0.5 + 8 * 2.0**-8 * e)  # no terms: |expected| is scaled
    got, allowance = tolerances.declared_precision(rounding, e * 0.5, e * 2.0, e, torch.float16)
    assert torch.allclose(allowance, 0.5 + 8 * 2.0**-11 * 2.0 * e)  # the terms, not |expected|, are scaled


def test_contract_refuses_an_unknown_precision_and_a_rule_that_is_no_function():
    with pytest.raises(RegistryError, match="precision"):
        Contract(precision="bf16")
    with pytest.raises(RegistryError, match="rule"):
        Contract(rule="V >= 2")


def test_rule_reasons_and_a_broken_rule():
    c = Contract(rule=lambda x, *rest: "one column" if x.shape[-1] == 1 else None)
    assert c.violations((torch.ones(2, 1),)) == ["one column (rule test_rule_reasons_and_a_broken_rule.<locals>.<lambda>)"]
    assert c.violations((torch.ones(2, 3),)) == []
    assert "rule " in c.describe()
    broken = Contract(rule=lambda *a: 1 / 0)
    with pytest.raises(RegistryError, match=r"raised ZeroDivisionError"):
        broken.violations((torch.ones(1),))
    with pytest.raises(RegistryError, match="must return None"):
        Contract(rule=lambda *a: 7).violations((torch.ones(1),))


def test_the_rule_stays_out_of_the_incremental_key():
    """repr(contract) is part of a kernel's key: a function's address in it would change every run."""
    assert "rule" not in repr(Contract(rule=len)) and "precision='input'" in repr(DECLARED)


# A rule evaluated where the kernel lives (its kernel process), through the CLI
PLUGIN = '''
import torch
from harness import register_kernel, Contract

def one_column(x, *rest):
    return "N = 1 (one column)" if x.shape[-1] == 1 else None

def _rms(x, gamma, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()).to(x.dtype)

@register_kernel("rmsnorm", name="r_rejects", contract=Contract(rule=one_column))
def r_rejects(x, gamma, eps):
    if one_column(x) is not None:
        raise ValueError(one_column(x))
    return _rms(x, gamma, eps)

@register_kernel("rmsnorm", name="r_accepts", contract=Contract(rule=one_column))
def r_accepts(x, gamma, eps):
    return _rms(x, gamma, eps)
'''


@pytest.mark.slow
def test_a_rule_runs_in_the_kernel_process_and_out_of_contract_cases_must_be_rejected(tmp_path):
    plugin = tmp_path / "ruled.py"
    plugin.write_text(PLUGIN)
    out = tmp_path / "r"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "verify", "--backend", "interpreter", "--plugin", str(plugin), "--op", "rmsnorm",
         "--select", "r_*", "--max-examples", "0", "--report-dir", str(out), "--jobs", "1", "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "verify.json").read_text())
    kernels = {k["name"]: k for k in report["kernels"]}
    assert kernels["r_rejects"]["passed"] and not kernels["r_accepts"]["passed"]
    assert "rule one_column" in kernels["r_rejects"]["contract"]
    one_col = [r for r in report["cases"] if ",N=1," in r["case_id"] + ","]
    assert one_col and all(r["check"] == "contract" for r in one_col)
    assert all(r["passed"] for r in one_col if r["kernel"] == "r_rejects")
    accepted = [r for r in one_col if r["kernel"] == "r_accepts"]
    assert accepted and not any(r["passed"] for r in accepted)
    assert all("N = 1 (one column) (rule one_column)" in r["message"] for r in accepted)
