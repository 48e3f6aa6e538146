"""Step 1, registry: what can be verified. Ops (their specs), kernels and mutants, contracts, plugin loading, and discovery of the modules an op brings (kernels, benches, mutant catalogs)."""
