"""Plain-torch float64 references. An oracle never imports a kernel."""

from oracles.fused_linear_ce import fused_linear_ce_backward, fused_linear_ce_magnitudes, fused_linear_ce_reference
from oracles.rmsnorm import rmsnorm_backward, rmsnorm_backward_magnitudes, rmsnorm_reference

__all__ = [
    "fused_linear_ce_backward",
    "fused_linear_ce_magnitudes",
    "fused_linear_ce_reference",
    "rmsnorm_backward",
    "rmsnorm_backward_magnitudes",
    "rmsnorm_reference",
]
