"""Step 4, compare: allclose with diagnostics against the oracle, and the tolerance table it reads."""
