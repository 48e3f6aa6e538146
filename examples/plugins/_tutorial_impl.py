"""The tutorial's RMSNorm, written as an outside kernel engineer would, for the
plugin examples. ``DIV_BY_BLOCK`` and ``DGAMMA_MEAN`` switch on the two bugs the design names:
dividing by BLOCK instead of N (forward and backward means), and a mean instead of a sum for
dgamma. Contract: contiguous fp32/fp16, N <= 4096."""

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd(X, G, Y, R, N, EPS, BLOCK: tl.constexpr, DIV_BY_BLOCK: tl.constexpr):
    row = tl.program_id(0)
    col = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + col, col < N, other=0).to(tl.float32)
    g = tl.load(G + col, col < N, other=0).to(tl.float32)
    denom = BLOCK if DIV_BY_BLOCK else N
    r = tl.rsqrt(tl.sum(x * x, 0) / denom + EPS)
    tl.store(Y + row * N + col, (x * r * g).to(Y.dtype.element_ty), col < N)
    tl.store(R + row, r)


@triton.jit
def _bwd(X, G, DY, R, DX, PARTIAL, N, BLOCK: tl.constexpr, DIV_BY_BLOCK: tl.constexpr):
    row = tl.program_id(0)
    col = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + col, col < N, other=0).to(tl.float32)
    g = tl.load(G + col, col < N, other=0).to(tl.float32)
    dy = tl.load(DY + row * N + col, col < N, other=0).to(tl.float32)
    r = tl.load(R + row)
    u = dy * g
    denom = BLOCK if DIV_BY_BLOCK else N
    dx = r * u - x * r * r * r * (tl.sum(u * x, 0) / denom)
    tl.store(DX + row * N + col, dx.to(DX.dtype.element_ty), col < N)
    tl.store(PARTIAL + row * N + col, dy * x * r, col < N)


def check(x, gamma, eps):
    if x.dtype not in (torch.float32, torch.float16) or gamma.dtype != x.dtype:
        raise TypeError(f"dtype {x.dtype}/{gamma.dtype}: only float32 or float16, both alike")
    if not (x.is_contiguous() and gamma.is_contiguous()):
        raise ValueError("x and gamma must be contiguous")
    if x.dim() != 2 or x.shape[1] > 4096 or gamma.shape != (x.shape[1],):
        raise ValueError(f"x must be [M, N<=4096] with gamma [N], got {tuple(x.shape)} and {tuple(gamma.shape)}")
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")


def make(div_by_block: bool = False, dgamma_mean: bool = False):
    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, gamma, eps):
            m, n = x.shape
            y = torch.empty_like(x)
            r = torch.empty(m, device=x.device, dtype=torch.float32)
            _fwd[(m,)](x, gamma, y, r, n, eps, triton.next_power_of_2(n), div_by_block)
            ctx.save_for_backward(x, gamma, r)
            return y

        @staticmethod
        def backward(ctx, dy):
            x, gamma, r = ctx.saved_tensors
            m, n = x.shape
            dy = dy.contiguous()
            dx = torch.empty_like(x)
            partial = torch.empty((m, n), device=x.device, dtype=torch.float32)
            _bwd[(m,)](x, gamma, dy, r, dx, partial, n, triton.next_power_of_2(n), div_by_block)
            dgamma = partial.mean(0) if dgamma_mean else partial.sum(0)
            return dx, dgamma.to(gamma.dtype), None

    def rmsnorm(x, gamma, eps):
        check(x, gamma, eps)
        return Fn.apply(x, gamma, eps)

    return rmsnorm
