"""Correctness harness and differential tester for Triton kernels.

Public plugin API: ``register_kernel``, ``register_mutant``, ``Contract``, and to declare an op:
``register_op``, ``OpDecl``, ``Tensor``, ``Index``, ``Scalar``, or from a torch function and example
inputs, ``from_reference`` (see docs/declaring-ops.md).
They are imported on first use, so ``python -m harness`` starts its launcher
(harness/launcher.py) without importing torch.
"""

import importlib

_API = {
    "Contract": "harness.registry.registry",
    "register_kernel": "harness.registry.registry",
    "register_mutant": "harness.registry.registry",
    "register_op": "harness.registry.registry",
    "HarnessError": "harness.errors",
    "PluginError": "harness.errors",
    "RegistryError": "harness.errors",
    "UsageError": "harness.errors",
    "OpDecl": "harness.registry.declare",
    "Tensor": "harness.registry.declare",
    "Index": "harness.registry.declare",
    "Scalar": "harness.registry.declare",
    "from_reference": "harness.ops.reference",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'harness' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
