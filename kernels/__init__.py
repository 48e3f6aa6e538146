"""The project's own Triton kernels, one module per op; each registers itself on import."""
