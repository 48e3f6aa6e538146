"""The value kinds' names, for plugins written against this path: the kinds live in
harness.ops.row_kinds (the engine draws them)."""

from harness.ops.row_kinds import GATES, KINDS, LOGITS, NORMALISATION, PROBABILITIES, draw

__all__ = ["GATES", "KINDS", "LOGITS", "NORMALISATION", "PROBABILITIES", "draw"]
