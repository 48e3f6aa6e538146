"""Incremental runs: each kernel's verdict and each mutant's outcome kept under a key of
everything that can change it, so an unchanged gate reuses them and a change reruns exactly
what it can affect."""
