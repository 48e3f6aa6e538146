"""Step 4, compare: allclose with diagnostics against the oracle, within the one error model (rounding, tolerances)."""
