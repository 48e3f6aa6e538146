"""harness.run.interpreter_casts: on the Triton interpreter a float32 -> bfloat16 cast of a
subnormal value gives what a GPU gives (float32's upper 16 bits, the interpreter's truncation),
not a value near the smallest normal; normal values and other casts are left as Triton makes them.

Bug class targeted: a false alarm on a correct kernel that stores tiny probabilities in bf16
(a fused linear cross-entropy's G = softmax - onehot: a gradient element 1e4 times too large on
the interpreter only, which the rounding error model rightly cannot explain).
"""

import pytest
import torch
import triton
import triton.language as tl

from harness.run import interpreter_casts
from harness.run.backend import current

pytestmark = pytest.mark.skipif(not current().is_interpreter, reason="a fix of the Triton interpreter's casts")

VALUES = [4.93e-43, -1e-41, 5e-39, 1.1e-38, 2e-38, -3.0e-38, 1.0, -2.5, 0.0, 1e30]


@triton.jit
def _to_bf16(X, Y, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(Y + i, tl.load(X + i).to(Y.dtype.element_ty))


def _cast(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty(x.shape, dtype=torch.bfloat16)
    _to_bf16[(1,)](x, y, N=x.numel())
    return y


def _truncated(x: torch.Tensor) -> torch.Tensor:
    """float32's upper 16 bits as bfloat16: truncation toward zero, exact for subnormals."""
    return (x.view(torch.int32) >> 16).to(torch.int16).view(torch.bfloat16)


def test_subnormals_cast_like_a_gpu_and_normal_values_as_before():
    x = torch.tensor(VALUES + [0.0] * (16 - len(VALUES)), dtype=torch.float32)
    normal = x.abs() >= torch.finfo(torch.float32).tiny
    before = None if interpreter_casts.installed() else _cast(x)
    assert interpreter_casts.install() and interpreter_casts.installed()
    after = _cast(x)
    assert torch.equal(after.view(torch.int16), _truncated(x).view(torch.int16))
    assert after[0].item() == 0.0 and after[1].item() == 0.0  # far below bf16's subnormals: 0, not ~4e-39
    if before is not None:  # the interpreter's own result: wrong on subnormals, kept on the rest
        assert torch.equal(before[normal].view(torch.int16), after[normal].view(torch.int16))
        assert before[0].item() > 1e-39  # the defect this module exists for (triton 3.9)


def test_install_is_idempotent_and_other_casts_untouched():
    assert interpreter_casts.install() and interpreter_casts.install()
    x = torch.tensor([1e-41, 3.0, -7.5e-39, 1e-38], dtype=torch.float32)
    y = torch.empty(4, dtype=torch.float16)
    _to_bf16[(1,)](x, y, N=4)  # float32 -> float16: Triton's own conversion
    assert torch.equal(y, x.to(torch.float16))


@triton.jit
def _bf16_math(A, B, O, S, N: tl.constexpr, OP: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(A + i)  # bf16, no upcast: arithmetic on bf16 values
    b = tl.load(B + i)
    if OP == 0:
        r = a + b
    elif OP == 1:
        r = a * b
    elif OP == 2:
        r = tl.fma(a, b, a)
    elif OP == 3:
        r = tl.where(a > b, a, b)
    elif OP == 4:
        r = tl.maximum(a, b)
    elif OP == 5:
        r = a - b
    else:
        r = -a
    tl.store(O + i, r)
    tl.store(S, tl.sum(a, axis=0))
    tl.store(S + 1, tl.max(b, axis=0))


@triton.jit
def _bf16_exp(A, O, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, tl.exp(tl.load(A + i).to(tl.float32)).to(tl.bfloat16))


BF16_OPS = {0: lambda a, b: a + b, 1: lambda a, b: a * b, 2: lambda a, b: a * b + a,
            3: lambda a, b: torch.where(a > b, a, b), 4: torch.maximum, 5: lambda a, b: a - b, 6: lambda a, b: -a}


@pytest.mark.parametrize("op", sorted(BF16_OPS))
def test_bf16_arithmetic_computes_the_values_a_gpu_computes(op):
    """Each operation on bf16 operands gives the float32 result rounded to nearest even bf16
    (the interpreter's own result is garbage: it adds the raw bits), and so do the sum and max."""
    assert interpreter_casts.install()
    g = torch.Generator().manual_seed(op)
    a = (torch.randn(64, generator=g) * 3).to(torch.bfloat16)
    b = (torch.randn(64, generator=g) * 3).to(torch.bfloat16)
    out, s = torch.empty_like(a), torch.empty(2, dtype=torch.bfloat16)
    _bf16_math[(1,)](a, b, out, s, N=64, OP=op)
    expected = BF16_OPS[op](a.float(), b.float()).to(torch.bfloat16)  # fp32 then one rounding (RNE)
    assert torch.equal(out, expected)
    assert torch.equal(s[0], a.float().sum().to(torch.bfloat16)) and torch.equal(s[1], b.max())
    e = torch.empty_like(a)
    _bf16_exp[(1,)](a, e, N=64)
    # exp in fp32, then the interpreter's fp32 -> bf16 cast, which truncates where torch rounds to
    # nearest: at most one bf16 ulp (2^-7 relative) apart, never more
    assert torch.allclose(e.float(), a.float().exp().to(torch.bfloat16).float(), rtol=2 ** -7, atol=0)


@triton.jit
def _bf16_dot(A, B, C, N: tl.constexpr):
    i = tl.arange(0, N)
    a = tl.load(A + i[:, None] * N + i[None, :])
    b = tl.load(B + i[:, None] * N + i[None, :])
    tl.store(C + i[:, None] * N + i[None, :], tl.dot(a, b))


def test_bf16_dot_accumulates_the_values_in_fp32():
    assert interpreter_casts.install()
    g = torch.Generator().manual_seed(7)
    a, b = (torch.randn((16, 16), generator=g).to(torch.bfloat16) for _ in range(2))
    c = torch.empty((16, 16), dtype=torch.float32)
    _bf16_dot[(1,)](a, b, c, N=16)
    # both sum the same 16 exact bf16 products in fp32, possibly in another order: a few fp32 ulps
    # (the raw-bits dot this replaces was off by orders of magnitude)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-6, atol=1e-6)
