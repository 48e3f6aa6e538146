"""Step 2, cases: one input configuration of an op, with a stable id and the one-line command that re-runs it."""
