"""Registering the generated mutants of the project's kernel modules (harness.mutation.mutagen's
``mutations``): each mutant runs as its branch of its module's schema (harness.mutation.schema)
or, where its change cannot be a branch or schemata are off, built alone
(``mutagen.SourceMutant``). Built lazily: a worker that runs one mutant pays for that one only;
names are deterministic (``mutagen.generated_name``), so a worker process regenerates a mutant
from its name alone.
"""

from __future__ import annotations

from harness.mutation import schema
from harness.mutation.mutagen import SourceMutant, generated_name, mutations, project_entries, project_modules
from harness.registry.registry import Origin, KernelEntry, register_mutant


def register_generated() -> int:
    """Register every generated mutant of every project kernel (built lazily); returns the count."""
    return sum(register_module_mutants(m, project_entries(m)) for m in project_modules())


def register_module_mutants(module_name: str, entries: list[KernelEntry]) -> int:
    """Register every generated mutant of one module, once per kernel entry it defines; returns
    the count. A mutant of an operator listed in ``BACKENDS`` carries those backends in its meta
    (observable only there, see campaign.observable_on)."""
    from harness.mutation.operators import BACKENDS

    count = 0
    found = mutations(module_name) if entries else []
    plans = schema.plans(module_name, found)  # the mutants that run as a branch of the module's schema
    for i, mutation in enumerate(found):
        for entry in entries:
            name = generated_name(entry, mutation, len(entries) > 1)
            if i in plans:
                fn = schema.SchemaMutant(plans[i], i + 1, module_name, entry.name, name, lambda m=mutation: m.source)
            else:
                fn = SourceMutant(module_name, entry.name, name, lambda m=mutation: m.source)
            backends = BACKENDS.get(mutation.operator)
            register_mutant(
                entry.op,
                name=name,
                contract=entry.contract,
                origin=Origin.GENERATED,
                description=f"{mutation.operator} in {mutation.function} at {mutation.location}",
                meta={
                    "operator": mutation.operator,
                    "location": mutation.location,
                    "diff": mutation.diff,
                    "fingerprint": mutation.fingerprint,
                    "kernel": entry.name,
                    **({"schema": True} if i in plans else {}),  # a branch of its module's schema (harness.mutation.schema)
                    **({"backends": list(backends)} if backends is not None else {}),
                },
            )(fn)
            count += 1
    return count
