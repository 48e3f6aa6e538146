"""The Triton specializations this process's launches would compile on CUDA: the GPU gate's cost,
counted where no GPU is (the interpreter compiles nothing).

Triton compiles a kernel once per specialization key of a launch: each constexpr's value, each
tensor argument's dtype and 16-byte alignment, each int argument's value being 1 or divisible by
16 (unless the kernel keeps it out with ``do_not_specialize``/``do_not_specialize_on_alignment``),
and the launch options (``num_warps``, ``num_stages``). The key here is computed with Triton's own
``native_specialize_impl`` (the function its JIT calls on every launch) on each launch that
harness.run.launches sees (its one wrapper of ``JITFunction.run`` and ``InterpretedFunction.run``); the kernel
process hands each call's new keys back with its reply (harness.run.kernel_host), the runner
records a case's keys on its first record, and verify counts the distinct keys per kernel
(reports/verify_report.py ``specializations``). On CUDA the count is the same figure the GPU
compiles (or loads from its disk cache), within what the key leaves out: the target's own
attributes, equal for every launch of a run. A key names its function with a digest of the code
Triton compiles (``source``): a mutant's kernels that its change left as they were keep the clean
kernel's keys (one compile on CUDA), the ones it changed get keys of their own (the campaign's
count, harness.mutation.campaign.specializations). A launch of a mutant schema's function
(harness.mutation.schema: the generated mutants of a module in one program, the mutant chosen by
a runtime argument) is keyed by the schema's program, and carries the key its mutant would have
built alone after ``ALONE`` (the count without schemata, kept beside it).
"""

from __future__ import annotations

import hashlib
import inspect
import re
import types
import weakref

from harness.run import launches

_state: dict = {"new": set(), "signatures": {}, "sources": weakref.WeakKeyDictionary()}
_MUTANT_SUFFIX = re.compile(r"__mutant_[0-9a-f]+$")  # harness.mutation.mutagen's copy of a module
_SKIP = ("grid", "warmup")
ALONE = " alone "  # a schema launch's key: "<compiled key> alone <the key of its mutant built alone>"


def _note(kernel, args: tuple, kwargs: dict) -> None:
    _state["new"].add(key(kernel, args, kwargs))


def install() -> None:
    launches.observe(_note)


def forget(kernel, args: tuple, kwargs: dict) -> None:
    """Take back a launch's key: it never ran as noted (a schema's launch that a mutant's branch
    made fail, redone by the mutant built alone: harness.mutation.schema)."""
    try:
        _state["new"].discard(key(kernel, args, kwargs))
    except Exception:  # as in _note: a cost figure is never the reason a launch fails
        pass


def drain() -> tuple[str, ...]:
    """The keys launched since the last drain."""
    new, _state["new"] = _state["new"], set()
    return tuple(sorted(new))


def _signature(fn) -> inspect.Signature:
    found = _state["signatures"].get(fn)
    if found is None:
        found = _state["signatures"][fn] = inspect.signature(fn)
    return found


def _names(kernel, option: str, params: list[str]) -> set[str]:
    """A jit option listing parameters by name or position, as names."""
    listed = getattr(kernel, option, None)
    if listed is None:
        listed = (getattr(kernel, "kwargs", None) or {}).get(option) or ()
    return {params[i] if isinstance(i, int) and i < len(params) else str(i) for i in listed}


def _is_constexpr(parameter: inspect.Parameter) -> bool:
    annotation = parameter.annotation
    if isinstance(annotation, str):
        return "constexpr" in annotation
    return getattr(annotation, "__name__", "") == "constexpr"


def _code_digest(code: types.CodeType, h) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_digest(const, h)
        else:
            h.update(repr(const).encode())


def source(fn) -> str:
    """A digest of what Triton compiles for ``fn``: its code and that of the jit functions and
    the constant globals it reads, recursively. A mutant whose change leaves a kernel's code as
    it was shares that kernel's compile (Triton's cache is keyed on the source, not the module)."""
    found = _state["sources"].get(fn)
    if found is None:
        h = hashlib.sha1()
        _digest(fn, h, set())
        found = _state["sources"][fn] = h.hexdigest()[:10]
    return found


def _digest(fn, h, seen: set) -> None:
    if id(fn) in seen:
        return
    seen.add(id(fn))
    _code_digest(fn.__code__, h)
    for name in fn.__code__.co_names:
        value = fn.__globals__.get(name)
        inner = getattr(value, "fn", None)
        if isinstance(inner, types.FunctionType) and callable(getattr(value, "run", None)):
            h.update(name.encode())
            _digest(inner, h, seen)
        elif isinstance(value, (int, float, bool, str)) or type(value).__name__ == "constexpr":
            h.update(f"{name}={value!r}".encode())


def key(kernel, args: tuple, kwargs: dict) -> str:
    """One launch's specialization key (module docstring), as text."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    fn = getattr(kernel, "fn", kernel)
    sig = _signature(fn)
    params = list(sig.parameters)
    given = {k: v for k, v in kwargs.items() if k in sig.parameters}
    bound = sig.bind_partial(*args, **given).arguments
    plain = _names(kernel, "do_not_specialize", params)
    unaligned = _names(kernel, "do_not_specialize_on_alignment", params)
    parts = []
    schema = set(getattr(kernel, "schema_params", ()))  # a schema's mutant id: a runtime int on CUDA, always
    for name, parameter in sig.parameters.items():
        if name not in bound:
            value = parameter.default
            if value is inspect.Parameter.empty:
                continue
        else:
            value = bound[name]
        if _is_constexpr(parameter) and name not in schema:
            parts.append(f"{name}={value!r}")
            continue
        try:
            spec = native_specialize_impl(BaseBackend, value, False, name not in plain, name not in unaligned)
        except Exception:  # a value the native key does not take: its type stands for it
            spec = (type(value).__name__,)
        parts.append(f"{name}:{':'.join(str(s) for s in spec)}")
    options = [f"{k}={v!r}" for k, v in sorted(kwargs.items()) if k not in sig.parameters and k not in _SKIP]
    module = _MUTANT_SUFFIX.sub("", fn.__module__)
    compiled = f"{module}.{fn.__qualname__}#{source(fn)}({', '.join(parts + options)})"
    alone = getattr(kernel, "alone_source", None)
    if alone is None:
        return compiled
    hidden = tuple(f"{name}:" for name in getattr(kernel, "schema_params", ()))
    kept = [p for p in parts if not p.startswith(hidden)]
    return f"{compiled}{ALONE}{module}.{fn.__qualname__}#{alone()}({', '.join(kept + options)})"


def split(key_text: str) -> tuple[str, str]:
    """(the program a launch compiles, the one it would compile if its mutant were built alone):
    the same but for a schema's launch (harness.mutation.schema)."""
    compiled, _, alone = key_text.partition(ALONE)
    return compiled, alone or compiled
