"""A plugin that declares a new op and verifies two kernels of it, without touching the project.

    python -m harness verify --plugin examples/plugins/scaled_tanh.py --op scaled_tanh --backend interpreter

The op ``scaled_tanh``: ``f(x[M, N], scale: float) -> y[M, N]``, y = scale * tanh(x) in x's
dtype, differentiable in x. The declaration is all the harness needs: floor cases, generated
cases, layouts, value kinds, float64 gradients and tolerances are derived from it.

Error model (harness.compare.rounding): twice the spread of the float64 reference when x and dy
are rounded within the input dtype, plus fp32 roundings of the terms, plus the output's
rounding. The forward has no terms beyond |y|, so a kernel must be accurate where fp32 allows:
tanh(x) ~ x for tiny x, where a naive 1 - 2 / (exp(2x) + 1) loses every digit. The derivative
dy * scale * (1 - tanh(x)^2) cancels terms of size |dy * scale| for large |x| (tanh rounds to 1
in fp32, and in float64 beyond |x| = 19), so those are its terms.
"""

import torch
import triton
import triton.language as tl

from harness import OpDecl, Scalar, Tensor, register_kernel, register_op

register_op(OpDecl(
    name="scaled_tanh",
    signature="f(x[M, N], scale: float) -> y[M, N]",
    inputs=(Tensor("x", "M, N"), Scalar("scale", (0.5, 2.0, -1.5))),
    output="M, N",
    reference=lambda x, scale: scale * torch.tanh(x),
    terms=lambda x, scale, dy: (None, (dy * scale).abs()),
    value_kinds=("normal", "zero_rows", "tiny", "huge", "mixed_scale", "nonfinite", "gate_extremes"),
    doc=__doc__,
))


@register_kernel("scaled_tanh", name="torch_fp32")
def scaled_tanh_torch(x, scale):
    return (scale * torch.tanh(x.float())).to(x.dtype)


@triton.jit
def _tanh(x):
    """tanh in fp32: an odd polynomial below 0.25 (Taylor to x^11: 1e-10 relative), else
    (1 - e) / (1 + e) with e = exp(-2|x|) (no cancellation there)."""
    a = tl.abs(x)
    small = tl.where(a < 0.25, x, 0.0)  # the polynomial only where it is used (no overflow warnings)
    x2 = small * small
    poly = small * (1.0 + x2 * (-1.0 / 3 + x2 * (2.0 / 15 + x2 * (-17.0 / 315 + x2 * (62.0 / 2835 - x2 * 1382.0 / 155925)))))
    e = tl.exp(-2.0 * a)
    t = (1.0 - e) / (1.0 + e)
    return tl.where(a < 0.25, poly, tl.where(x < 0, -t, t))


@triton.jit
def _forward(x_ptr, y_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (scale * _tanh(x)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _backward(x_ptr, dy_ptr, dx_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    t = _tanh(x)
    tl.store(dx_ptr + offs, (dy * scale * (1.0 - t * t)).to(dx_ptr.dtype.element_ty), mask=mask)


def _launch(kernel, out, *args):
    n = out.numel()
    kernel[(triton.cdiv(n, 1024),)](*args, n, BLOCK=1024)
    return out


class _ScaledTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        x = x.contiguous()
        ctx.save_for_backward(x)
        ctx.scale = scale
        y = torch.empty_like(x)
        return _launch(_forward, y, x, y, scale)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        dx = torch.empty_like(x)
        _launch(_backward, dx, x, dy.contiguous(), dx, ctx.scale)
        return dx, None


@register_kernel("scaled_tanh", name="triton")
def scaled_tanh_triton(x, scale):
    return _ScaledTanh.apply(x, scale)
