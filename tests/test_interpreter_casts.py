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
