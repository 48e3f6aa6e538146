"""Plain-torch float64 references. An oracle never imports a kernel."""

from oracles.rmsnorm import rmsnorm_backward, rmsnorm_backward_magnitudes, rmsnorm_reference

__all__ = ["rmsnorm_reference", "rmsnorm_backward", "rmsnorm_backward_magnitudes"]
