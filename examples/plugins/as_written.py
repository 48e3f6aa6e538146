"""Triton kernels as inference engines and training libraries write them, each registered with the
`Contract` that says what it is, and nothing else adapted:

    python -m harness verify --plugin examples/plugins/as_written.py --select 'wild_*' --backend interpreter

- ``wild_softmax_inference``: a forward-only softmax (no backward): ``Contract(forward_only=True)``;
  it flattens any leading dims, so the ``x[B, S, N]`` cases run too.
- ``wild_softmax_inplace``: a 2-D inference softmax that writes y over x and returns x, and
  asserts a unit column stride in its wrapper: ``forward_only``, ``inplace={"y": "x"}``,
  ``max_leading_dims=1``, ``self_limits=True`` (its refusals are listed in the report).
- ``wild_rmsnorm_dx_into_dy``: an RMSNorm whose backward writes dx into the upstream gradient's
  storage (Liger-Kernel's memory saving): ``inplace={"dx": "dy"}``.
- ``wild_gemma_rmsnorm`` (``rmsnorm_offset``: y = x * rstd * (1 + w)), ``wild_masked_softmax``
  (``softmax_masked``: softmax(scale * x + mask)), ``wild_layer_norm_plain`` (``layer_norm_plain``:
  no weight, no bias): the fused variants, forward-only.
- ``wild_bias_gelu``: an op declared from a torch function (``from_reference``), gelu(x + b) with
  the tanh approximation, and its forward-only kernel.

Every kernel indexes in int64 and takes each tensor's own strides, so the index-width and mixed
layouts of a GPU run hold for them too.
"""

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from harness import Contract, from_reference, register_kernel
from kernels._contract import as_rows

FORWARD_ONLY = Contract(forward_only=True)


def _block(n: int) -> int:
    return triton.next_power_of_2(n)


def _warps(block: int) -> int:
    return min(max(block // 2048, 4), 16)  # one row per program: more warps for long rows


# ---------------------------------------------------------------- softmax, forward only

@triton.jit
def _softmax_fwd(X, Y, M, sxm, sxn, sym, syn, N, scale, BLOCK: tl.constexpr, HAS_MASK: tl.constexpr,
                 MASK_PTR, smm, smn):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK).to(tl.int64)
    inside = cols < N
    x = tl.load(X + row * sxm + cols * sxn, mask=inside, other=0.0).to(tl.float32) * scale
    if HAS_MASK:
        x += tl.load(MASK_PTR + row * smm + cols * smn, mask=inside, other=0.0).to(tl.float32)
    x = tl.where(inside, x, -float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(Y + row * sym + cols * syn, (e / tl.sum(e, axis=0)).to(Y.dtype.element_ty), mask=inside)


def _softmax_launch(x2, y2, scale=1.0, mask2=None):
    m, n = x2.shape
    mk = mask2 if mask2 is not None else x2
    _softmax_fwd[(m,)](x2, y2, m, x2.stride(0), x2.stride(1), y2.stride(0), y2.stride(1), n, scale,
                       BLOCK=_block(n), HAS_MASK=mask2 is not None, MASK_PTR=mk, smm=mk.stride(0), smn=mk.stride(1),
                       num_warps=_warps(_block(n)))


@register_kernel("softmax", name="wild_softmax_inference", contract=FORWARD_ONLY,
                 description="one program per row, no backward; leading dims flattened")
@torch.no_grad()
def wild_softmax_inference(x):
    rows = as_rows(x)
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    _softmax_launch(rows, y)
    return y.reshape(x.shape)


@register_kernel("softmax", name="wild_softmax_inplace",
                 contract=Contract(forward_only=True, inplace={"y": "x"}, max_leading_dims=1, self_limits=True),
                 description="2-D, writes y over x, asserts a unit column stride")
@torch.no_grad()
def wild_softmax_inplace(x):
    assert x.dim() == 2 and x.stride(1) == 1, "x must be 2-D with unit column stride"
    _softmax_launch(x, x)
    return x


@register_kernel("softmax_masked", name="wild_masked_softmax", contract=FORWARD_ONLY,
                 description="softmax(scale * x + mask), forward only")
@torch.no_grad()
def wild_masked_softmax(x, mask, scale):
    rows, mrows = as_rows(x), as_rows(mask)
    y = torch.empty(rows.shape, dtype=x.dtype, device=x.device)
    _softmax_launch(rows, y, scale, mrows)
    return y.reshape(x.shape)


# ---------------------------------------------------------------- norms, forward only

@triton.jit
def _norm_fwd(X, W, Y, RSTD, sxm, sxn, sym, syn, sw, N, eps, offset, BLOCK: tl.constexpr,
              CENTER: tl.constexpr, HAS_W: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK).to(tl.int64)
    inside = cols < N
    x = tl.load(X + row * sxm + cols * sxn, mask=inside, other=0.0).to(tl.float32)
    if CENTER:
        x = tl.where(inside, x - tl.sum(x, axis=0) / N, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    y = x * rstd
    if HAS_W:
        y = y * (offset + tl.load(W + cols * sw, mask=inside, other=0.0).to(tl.float32))
    tl.store(RSTD + row, rstd)
    tl.store(Y + row * sym + cols * syn, y.to(Y.dtype.element_ty), mask=inside)


def _norm(x, w, eps, offset=0.0, center=False):
    rows = as_rows(x)
    m, n = rows.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    wt = w if w is not None else rows
    _norm_fwd[(m,)](rows, wt, y, rstd, rows.stride(0), rows.stride(1), y.stride(0), y.stride(1),
                    wt.stride(-1), n, eps, offset, BLOCK=_block(n), CENTER=center, HAS_W=w is not None,
                    num_warps=_warps(_block(n)))
    return y.reshape(x.shape), rows, rstd


@register_kernel("rmsnorm_offset", name="wild_gemma_rmsnorm", contract=FORWARD_ONLY,
                 description="gemma's y = x * rstd * (offset + w), forward only")
@torch.no_grad()
def wild_gemma_rmsnorm(x, gamma, eps, offset):
    return _norm(x, gamma, eps, offset)[0]


@register_kernel("layer_norm_plain", name="wild_layer_norm_plain", contract=FORWARD_ONLY,
                 description="layer norm without weight or bias, forward only")
@torch.no_grad()
def wild_layer_norm_plain(x, eps):
    return _norm(x, None, eps, center=True)[0]


# ---------------------------------------------------------------- RMSNorm, dx written into dy

@triton.jit
def _rms_bwd(DY, X, W, RSTD, DWP, sdm, sdn, sxm, sxn, sw, N, BLOCK: tl.constexpr):
    """dx = rstd * (w dy) - rstd^3 / N * x * sum(x w dy), stored over dy; w's partial per row."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK).to(tl.int64)
    inside = cols < N
    dy = tl.load(DY + row * sdm + cols * sdn, mask=inside, other=0.0).to(tl.float32)
    x = tl.load(X + row * sxm + cols * sxn, mask=inside, other=0.0).to(tl.float32)
    w = tl.load(W + cols * sw, mask=inside, other=0.0).to(tl.float32)
    rstd = tl.load(RSTD + row)
    u = dy * w
    dx = rstd * u - rstd * rstd * rstd / N * x * tl.sum(u * x, axis=0)
    tl.store(DWP + row * N + cols, dy * x * rstd, mask=inside)
    tl.store(DY + row * sdm + cols * sdn, dx.to(DY.dtype.element_ty), mask=inside)


class _RMSNormDxIntoDy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, gamma, eps):
        y, rows, rstd = _norm(x, gamma, eps)
        ctx.save_for_backward(rows, gamma, rstd)
        ctx.x_shape = x.shape
        return y

    @staticmethod
    def backward(ctx, dy):
        rows, gamma, rstd = ctx.saved_tensors
        m, n = rows.shape
        dy2 = dy
        partial = torch.empty((m, n), dtype=torch.float32, device=dy.device)
        _rms_bwd[(m,)](dy2, rows, gamma, rstd, partial, dy2.stride(0), dy2.stride(1), rows.stride(0),
                       rows.stride(1), gamma.stride(0), n, BLOCK=_block(n), num_warps=_warps(_block(n)))
        return dy, partial.sum(0).to(gamma.dtype), None


@register_kernel("rmsnorm", name="wild_rmsnorm_dx_into_dy", contract=Contract(inplace={"dx": "dy"}),
                 description="backward stores dx in the upstream gradient's storage")
def wild_rmsnorm_dx_into_dy(x, gamma, eps):
    return _RMSNormDxIntoDy.apply(x, gamma, eps)


# ---------------------------------------------------------------- an op from a torch function

bias_gelu = from_reference(lambda x, b: F.gelu(x + b, approximate="tanh"), (torch.randn(8, 300), torch.randn(300)),
                           vary={"x": ("M", "N"), "b": ("N",)}, name="bias_gelu")


@triton.jit
def _bias_gelu_fwd(X, B, Y, sxm, sxn, sym, syn, sb, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    inside = cols < N
    z = tl.load(X + row * sxm + cols * sxn, mask=inside, other=0.0).to(tl.float32) + \
        tl.load(B + cols * sb, mask=inside, other=0.0).to(tl.float32)
    # 0.5 (1 + tanh(u)) == sigmoid(2u): no cancellation where tanh(u) is near -1
    u = 0.7978845608028654 * (z + 0.044715 * z * z * z)
    tl.store(Y + row * sym + cols * syn, (z * tl.sigmoid(2.0 * u)).to(Y.dtype.element_ty), mask=inside)


@register_kernel(bias_gelu.name, name="wild_bias_gelu", contract=FORWARD_ONLY,
                 description="gelu(x + b), tanh form, forward only")
@torch.no_grad()
def wild_bias_gelu(x, b):
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block = min(1024, _block(n))
    _bias_gelu_fwd[(m, triton.cdiv(n, block))](x, b, y, x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                                               b.stride(0), n, BLOCK=block)
    return y
