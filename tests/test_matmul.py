"""kernels.matmul against the float64 oracle: K = 1, 17, 257, irregular M and N, transposed
operands, every activation and dtype; wrong twins (the epilogue before the bias, TF32 products
for fp32) fail the same checks; the TF32 stand-in passes only when declared; out-of-contract
inputs rejected before any launch."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from harness import Contract
from harness.testing import assert_kernel
from kernel_checks import assert_close, assert_rejected
from kernels import matmul as k

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from tf32_matmul import _tf32_matmul  # noqa: E402

# (M, K, N, dtype, activation, a transposed, b transposed)
CASES = [
    (7, 1, 5, torch.float32, "relu", False, True),
    (3, 17, 33, torch.bfloat16, "gelu_tanh", True, False),
    (5, 257, 9, torch.float32, "gelu_tanh", True, True),
    (17, 31, 1, torch.float16, "none", False, False),
    (1, 65, 70, torch.bfloat16, "relu", False, True),
]


def _inputs(m, kdim, n, dtype, a_t, b_t, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, kdim, generator=g, dtype=torch.float64)
    b = torch.randn(kdim, n, generator=g, dtype=torch.float64)
    bias = torch.randn(n, generator=g, dtype=torch.float64)
    dy = torch.randn(m, n, generator=g, dtype=torch.float64)
    a = a.to(dtype).t().contiguous().t() if a_t else a.to(dtype)  # a transposed view
    b = b.to(dtype).t().contiguous().t() if b_t else b.to(dtype)
    return a, b, bias.to(dtype), dy.to(dtype).t().contiguous().t()


def _check(fn, a, b, bias, dy, activation):
    leaves = [t.detach().clone().requires_grad_() for t in (a, b, bias)]
    y = fn(*leaves, activation)
    grads = torch.autograd.grad(y, leaves, dy)
    assert_close("matmul", (a, b, bias, activation), dy, forward=y, **dict(zip(("da", "db", "dbias"), grads)))


@pytest.mark.parametrize("m, kdim, n, dtype, activation, a_t, b_t", CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_matches_oracle(m, kdim, n, dtype, activation, a_t, b_t):
    a, b, bias, dy = _inputs(m, kdim, n, dtype, a_t, b_t, seed=m + kdim + n)
    _check(k.matmul, a, b, bias, dy, activation)


def _epilogue_before_bias(a, b, bias, activation):
    z = k.matmul(a, b, torch.zeros_like(bias), activation)
    return z + bias


@pytest.mark.parametrize("twin", [_epilogue_before_bias, _tf32_matmul], ids=["epilogue before bias", "tf32 products"])
def test_wrong_twins_fail(twin):
    """Bug classes: act(a @ b) + bias; fp32 products in TF32 (a 10-bit mantissa) off by 2^-11 of the terms."""
    a, b, bias, dy = _inputs(9, 257, 13, torch.float32, True, False, seed=3)
    with pytest.raises(AssertionError, match=r"^matmul (forward|da|db): Mismatched"):
        _check(twin, a, b, bias, dy, "gelu_tanh")


FP32_CASE = "matmul:M=7,K=257,N=7,dtype=float32,layout=transposed,values=normal,activation=relu,seed=11"
BF16_CASE = "matmul:M=7,K=257,N=7,dtype=bfloat16,layout=mixed,values=normal,activation=gelu_tanh,seed=12"


def test_harness_suite_passes_the_kernel_in_process():
    for case in (FP32_CASE, BF16_CASE):
        assert_kernel("matmul", k.matmul, case=case, backend="interpreter")


def test_tf32_fails_fp32_undeclared_and_passes_declared():
    """Contract(precision=("tfloat32", 2)) is what lets TF32 products through, on fp32 cases only."""
    with pytest.raises(AssertionError, match="forward|da|db"):
        assert_kernel("matmul", _tf32_matmul, case=FP32_CASE, backend="interpreter")
    assert_kernel("matmul", _tf32_matmul, case=FP32_CASE, backend="interpreter", contract=Contract(precision=("tfloat32", 2)))
    with pytest.raises(AssertionError, match="forward"):
        assert_kernel("matmul", _epilogue_before_bias, case=FP32_CASE, backend="interpreter",
                      contract=Contract(precision=("tfloat32", 2)))


def test_k_zero_gives_the_activation_of_the_bias():
    a, b, bias = torch.ones(3, 0), torch.ones(0, 4), torch.tensor([-1.0, 0.5, 2.0, -3.0])
    torch.testing.assert_close(k.matmul(a, b, bias, "gelu_tanh"), F.gelu(bias, approximate="tanh").expand(3, 4))


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: (torch.ones(2, 3, 4), torch.ones(4, 5), torch.ones(5), "none"), ValueError, "2-D"),
        (lambda: (torch.ones(2, 3), torch.ones(4, 5), torch.ones(5), "none"), ValueError, "K = 3 rows"),
        (lambda: (torch.ones(2, 3), torch.ones(3, 5), torch.ones(4), "none"), ValueError, "bias must be [N]"),
        (lambda: (torch.ones(2, 3), torch.ones(3, 5), torch.ones(5), "silu"), ValueError, "activation must be one of"),
        (lambda: (torch.ones(2, 3), torch.ones(3, 5, dtype=torch.float16), torch.ones(5), "none"), TypeError, "cast b"),
        (lambda: (torch.ones(2, 3, dtype=torch.float64), torch.ones(3, 5, dtype=torch.float64), torch.ones(5, dtype=torch.float64), "none"), TypeError, "float64"),
    ],
)
def test_contract_errors_raise_before_any_launch(make, error, words, monkeypatch):
    assert_rejected(k.matmul, make(), error, words, module=k, monkeypatch=monkeypatch, no_launch=("_matmul", "_activation_grad"))


def test_bench_implementations_agree_and_count_flops():
    from bench import matmul as bench

    ws = {w.name: w for w in bench.workloads()}
    assert ws["8192x4096x4096 gelu_tanh bf16"].flops["forward"] == 2.0 * 8192 * 4096 * 4096
    inputs = next(w for w in ws.values() if w.quick).make("cpu")
    impls = bench.implementations()
    want = impls["torch addmm + activation"](*inputs.args)
    torch.testing.assert_close(impls["triton_matmul (project)"](*inputs.args), want)
