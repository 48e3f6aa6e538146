"""The value distributions, for plugins written against this path: they live in
harness.ops.values (the engine draws them)."""

from harness.ops.values import ROW_KINDS, additive_mask, gains, generator, rows, upstream

__all__ = ["ROW_KINDS", "additive_mask", "gains", "generator", "rows", "upstream"]
