"""Correctness harness and differential tester for Triton kernels.

Public plugin API: ``register_kernel``, ``register_mutant``, ``Contract``, and to declare an op:
``register_op``, ``OpDecl``, ``Tensor``, ``Index``, ``Scalar`` (see README, "Declaring an op").
"""

from harness.errors import HarnessError, PluginError, RegistryError, UsageError
from harness.registry.declare import Index, OpDecl, Scalar, Tensor
from harness.registry.registry import Contract, register_kernel, register_mutant, register_op

__all__ = [
    "Contract",
    "HarnessError",
    "Index",
    "OpDecl",
    "PluginError",
    "RegistryError",
    "Scalar",
    "Tensor",
    "UsageError",
    "register_kernel",
    "register_mutant",
    "register_op",
]
