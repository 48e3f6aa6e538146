"""Where an op's content lives, and the one helper that finds it.

The engine never imports an op's kernel, bench or mutant catalog by name: it asks for the
modules of one of these packages. Adding an op means adding files to them, nothing here.
"""

from __future__ import annotations

import importlib
import pkgutil

OPS = "properties.ops"  # op specs (one module per op)
KERNELS = "kernels"  # the project's kernels (each module registers its own)
MUTANTS = "properties.mutants"  # catalogs of hand-written mutants, generated mutants, sanity mutants
BENCHES = "bench"  # benchmark definitions, bench/<op>.py


def modules(package: str) -> list[str]:
    """The public modules of ``package`` (names not starting with ``_``), sorted."""
    pkg = importlib.import_module(package)
    return [f"{package}.{m.name}" for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name)
            if not m.name.startswith("_")]


def import_all(package: str) -> list[str]:
    """Import every public module of ``package`` (each registers what it defines); their names."""
    names = modules(package)
    for name in names:
        importlib.import_module(name)
    return names
