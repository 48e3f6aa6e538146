"""The forced failure of the campaign's sanity step (as mutmut does before scoring).

For every project kernel, a mutant that adds 1 to the kernel's output: if the properties do
not fail it, they cannot be trusted to fail anything, and the campaign refuses to score.
Registered with ``origin="sanity"``; the campaign never counts it as a mutant.
"""

from __future__ import annotations

from harness.mutation.outcome import SANITY_PREFIX as PREFIX
from harness.registry.registry import Origin, REGISTRY, register_mutant


def _forced_failure(fn):
    def broken(*args, **kwargs):
        return fn(*args, **kwargs) + 1

    return broken


for _entry in REGISTRY.select(kind="kernel"):
    if _entry.origin is Origin.PROJECT:
        register_mutant(
            _entry.op,
            name=PREFIX + _entry.name,
            contract=_entry.contract,
            origin=Origin.SANITY,
            description=f"forced failure: {_entry.name} with 1 added to its output",
        )(_forced_failure(_entry.fn))
