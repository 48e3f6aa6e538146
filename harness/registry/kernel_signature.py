"""A kernel takes its op's arguments: checked when it is registered, not by a TypeError on every case.

The harness calls a kernel with the op's declared inputs, positionally, in their order
(``OpDecl.inputs``; e.g. rmsnorm's ``(x, gamma, eps)``). A function that cannot be called so
(too few or too many parameters, a required keyword-only one) is refused with the op's signature.
Defaults, ``*args`` and ``**kwargs`` are accepted as Python accepts them; a callable without a
signature Python can read (a builtin, a C extension's function) is accepted unchecked.
"""

from __future__ import annotations

import inspect
from typing import Any

from harness.errors import RegistryError


def validate(entry: Any, spec: Any) -> None:
    """A RegistryError unless ``entry.fn`` can be called with the op's inputs, positionally."""
    decl = getattr(spec, "decl", None)
    if decl is None:
        return  # not a declared op: no list of inputs to check against
    names = [i.name for i in decl.inputs]
    try:
        signature = inspect.signature(entry.fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*names)
    except TypeError as exc:
        raise RegistryError(
            f"{entry.kind} {entry.name!r} ({entry.defined_at}) takes {signature} but op {spec.name!r} calls it with "
            f"{len(names)} positional argument(s): {spec.signature} ({exc}); define it as "
            f"def {getattr(entry.fn, '__name__', entry.name)}({', '.join(names)})") from None
