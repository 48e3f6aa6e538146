"""LayerNorm with its affine parts absent, as libraries ship it: ``layer_norm_weight`` (a weight,
no bias: T5-style and many fused kernels' ``bias=None``) and ``layer_norm_plain`` (neither:
``elementwise_affine=False``, the normalisation inside adaptive norms).

Kernel signatures: ``f(x[M, N], weight[N], eps: float) -> y[M, N]`` and ``f(x[M, N], eps: float)
-> y[M, N]``, x also ``[..., N]`` (leading dims, as ``layer_norm``: dweight sums over all of
them), the population variance (1/N), y in x's dtype, differentiable in x (and weight). Checks: forward, dx (and dweight), plus the common ones.

Error model: the ``layer_norm`` op's (properties.ops.layer_norm), with the absent weight read as
ones and the absent bias as zeros: the centred row's cancellation terms set the fp32 part.
"""

import torch

from harness.registry.declare import OpDecl, Scalar, Tensor
from harness.registry.registry import register_op
from oracles.layer_norm import layer_norm_backward_magnitudes, layer_norm_forward_magnitudes, layer_norm_reference
from harness.ops import row_kinds, values

EPS = Scalar("eps", (1e-5, 1e-6, 1e-12, 0.1))
KINDS = values.ROW_KINDS + row_kinds.NORMALISATION


def _ones(x):
    return torch.ones(x.shape[-1], dtype=torch.float64, device=x.device)


def _zeros(x):
    return torch.zeros(x.shape[-1], dtype=torch.float64, device=x.device)


def _weight_terms(x, w, eps, dy):
    dx, dw, _ = layer_norm_backward_magnitudes(x, w, _zeros(x), eps, dy)
    return layer_norm_forward_magnitudes(x, w, _zeros(x), eps), dx, dw


def _plain_terms(x, eps, dy):
    dx, _, _ = layer_norm_backward_magnitudes(x, _ones(x), _zeros(x), eps, dy)
    return layer_norm_forward_magnitudes(x, _ones(x), _zeros(x), eps), dx


register_op(OpDecl(
    name="layer_norm_weight",
    signature="f(x[M, N], weight[N], eps: float) -> y[M, N]",
    inputs=(Tensor("x", "M, N"), Tensor("weight", "N", values="gain"), EPS),
    output="M, N",
    leading="M",  # x[..., N], as layer_norm: cases also give M as 2 to 4 leading dims (harness.ops.leading)
    reference=lambda x, w, eps: layer_norm_reference(x, w, _zeros(x), eps),
    terms=_weight_terms,
    reduces="N",
    value_kinds=KINDS,
    doc=__doc__,
))

register_op(OpDecl(
    name="layer_norm_plain",
    signature="f(x[M, N], eps: float) -> y[M, N]",
    inputs=(Tensor("x", "M, N"), EPS),
    output="M, N",
    leading="M",  # x[..., N], as layer_norm: cases also give M as 2 to 4 leading dims (harness.ops.leading)
    reference=lambda x, eps: layer_norm_reference(x, _ones(x), _zeros(x), eps),
    terms=_plain_terms,
    reduces="N",
    value_kinds=KINDS,
    doc=__doc__,
))
