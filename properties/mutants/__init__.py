"""Mutants for the mutation campaign (``python -m harness mutate``), one module per concern.

- ``<op>.py``: the hand-written catalog of an op's realistic bugs (``origin="catalog"``);
- ``generated.py``: every generated source mutant of the project's ``@triton.jit`` kernels;
- ``sanity.py``: the forced failure the campaign must detect before it scores anything;
- ``equivalent.toml``: survivors judged equivalent, each with its written reason.

``verify`` never imports this package; ``mutate`` imports every module of it, in the parent
and (through ``Job.extra_modules``) in each worker.
"""

__all__: list[str] = []


INDEX_WIDTH_TAIL = (
    "an int32 row index times the row stride overflows once the offset passes 2**31 elements (Liger-Kernel "
    "#251 and #803: program_id is int32, and so is a stride below 2**31); only a GPU shows it, on the CUDA "
    "floor's index-width cases (harness.ops.layouts: a row stride just under 2**31); the interpreter's "
    "inputs stay far below 2**31"
)


def row_offset_int32(*, function: str, old: str, new: str, what: str) -> dict:
    """The catalog entry every op has for its row offset computed in int32 (``what``: where), GPU-only."""
    return dict(name="cat.row_offset_int32", bug_class="index-width", function=function, old=old, new=new,
                why=f"{what}: {INDEX_WIDTH_TAIL}", backends=["cuda"])
