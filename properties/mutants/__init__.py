"""Mutants for the mutation campaign (``python -m harness mutate``), one module per concern.

- ``<op>.py``: the hand-written catalog of an op's realistic bugs (``origin="catalog"``);
- ``generated.py``: every generated source mutant of the project's ``@triton.jit`` kernels;
- ``sanity.py``: the forced failure the campaign must detect before it scores anything;
- ``equivalent.toml``: survivors judged equivalent, each with its written reason.

``verify`` never imports this package; ``mutate`` imports every module of it, in the parent
and (through ``Job.extra_modules``) in each worker.
"""

__all__: list[str] = []
