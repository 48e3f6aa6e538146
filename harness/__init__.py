"""Correctness harness and differential tester for Triton kernels.

Public plugin API: ``register_kernel``, ``register_mutant``, ``Contract``.
"""

import sys

try:
    from harness.errors import HarnessError, PluginError, RegistryError, UsageError
    from harness.registry.registry import Contract, register_kernel, register_mutant, register_op
except KeyboardInterrupt:
    # `python -m harness` imports this package (torch, triton) before its __main__ runs; while
    # it does, sys.argv[0] is "-m": Ctrl-C there is one line and exit 130, not an import traceback
    if sys.argv[:1] == ["-m"]:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    raise

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
