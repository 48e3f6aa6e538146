"""Correctness harness and differential tester for Triton kernels.

Public plugin API: ``register_kernel``, ``register_mutant``, ``Contract``.
"""

from harness.errors import HarnessError, PluginError, RegistryError, UsageError
from harness.registry.registry import Contract, register_kernel, register_mutant, register_op

__all__ = [
    "Contract",
    "HarnessError",
    "PluginError",
    "RegistryError",
    "UsageError",
    "register_kernel",
    "register_mutant",
    "register_op",
]
