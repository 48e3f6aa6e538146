"""The size and order of an op's floor, read from its spec rather than written into tests."""
def rmsnorm_floor() -> list:
    """The rmsnorm floor on the interpreter (its size moves when the floor gains cases)."""
    from harness.registry.registry import REGISTRY, load_builtin_ops

    load_builtin_ops()
    return REGISTRY.op("rmsnorm").floor_cases(backend="interpreter")
