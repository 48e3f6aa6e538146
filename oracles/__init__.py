"""Plain-torch float64 references. An oracle never imports a kernel."""

from oracles.cross_entropy import cross_entropy_backward, cross_entropy_magnitudes, cross_entropy_reference
from oracles.fused_linear_ce import fused_linear_ce_backward, fused_linear_ce_magnitudes, fused_linear_ce_reference
from oracles.layer_norm import (
    layer_norm_backward,
    layer_norm_backward_magnitudes,
    layer_norm_forward_magnitudes,
    layer_norm_reference,
)
from oracles.rmsnorm import rmsnorm_backward, rmsnorm_backward_magnitudes, rmsnorm_reference
from oracles.softmax import softmax_backward, softmax_backward_magnitudes, softmax_forward_magnitudes, softmax_reference
from oracles.swiglu import swiglu_backward, swiglu_backward_magnitudes, swiglu_reference

__all__ = [
    "cross_entropy_backward",
    "cross_entropy_magnitudes",
    "cross_entropy_reference",
    "fused_linear_ce_backward",
    "fused_linear_ce_magnitudes",
    "fused_linear_ce_reference",
    "layer_norm_backward",
    "layer_norm_backward_magnitudes",
    "layer_norm_forward_magnitudes",
    "layer_norm_reference",
    "rmsnorm_backward",
    "rmsnorm_backward_magnitudes",
    "rmsnorm_reference",
    "softmax_backward",
    "softmax_backward_magnitudes",
    "softmax_forward_magnitudes",
    "softmax_reference",
    "swiglu_backward",
    "swiglu_backward_magnitudes",
    "swiglu_reference",
]
