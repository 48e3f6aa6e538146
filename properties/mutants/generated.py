"""Importing this module registers every generated mutant of every project kernel.

The mutants are built lazily (the first call re-executes the mutated module), so a worker
that runs one mutant pays for that one only; names are deterministic (see harness.mutation.generated).
"""

from harness.mutation.generated import register_generated

COUNT = register_generated()
