"""Shortcuts: a KernelBench candidate that hands the whole computation to the reference.

A candidate that calls the problem's ``Model`` (found in ``sys.modules``, or the problem file
imported again) or the problem's own torch op is right by construction: it verifies nothing of a
kernel. :func:`detect` runs the candidate once on the example inputs (``get_inputs()``), in the
process that registers it, and says so when either holds:

- **the reference's forward ran**: a Python profile hook sees a call of a function whose code is
  the reference forward's (same name, bytecode, constants and names: the class in ``sys.modules``,
  a fresh import of the problem file, or a verbatim copy of it);
- **the same torch calls, no kernel**: the candidate launched no Triton kernel and the torch
  functions it called (a ``TorchFunctionMode`` sees each top-level call: ``torch.softmax``,
  ``F.linear``, a Tensor method), leaving out those that only convert, copy or reshape
  (``NEUTRAL``), are the reference's, in order, by name (``torch.softmax``, ``F.softmax`` and
  ``Tensor.softmax`` are one name).

An honest Triton candidate launches its kernel and never runs the reference's forward; an honest
torch candidate written otherwise (softmax as exp / sum) calls other functions. Neither is flagged.
What it does not see: a candidate that calls the reference only at other sizes than the example's,
or only after its first call, or hides its calls from a profile hook and a torch-function mode.

``verify`` records the finding on the kernel (verify.json ``shortcut``; the console, summary.md and
the HTML report show it): PASS with the flag by default, FAIL under ``verify --strict``
(:func:`apply_strict`).
"""

from __future__ import annotations

import copy
import sys
from typing import Any

from vocabulary import FailureClass, Verdict

MODEL = "calls the reference Model"
# torch functions that convert, copy, allocate or reshape: a candidate may wrap the reference's ops in them
NEUTRAL = frozenset({
    "to", "float", "double", "half", "bfloat16", "type", "type_as", "contiguous", "clone", "detach", "cpu", "cuda",
    "view", "view_as", "reshape", "reshape_as", "flatten", "unsqueeze", "squeeze", "expand", "expand_as",
    "size", "dim", "numel", "stride", "is_contiguous", "is_floating_point", "data_ptr", "element_size",
    "empty", "empty_like", "new_empty", "copy_", "requires_grad_", "__get__", "__set__", "__len__",
    "__getitem__", "__setitem__", "__format__", "__repr__", "__bool__", "__index__", "__int__", "__float__",
})


def detect(model, candidate, inputs: list, device) -> str | None:
    """What shortcut ``candidate`` (ModelNew) takes on ``inputs``, or None; ``model`` is the
    reference Model with the same weights. Anything the calls raise is no finding (the cases show it)."""
    import torch

    from harness.run import launches

    launches.install()
    try:
        args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in inputs]
        reference = copy.deepcopy(model).to(device)
        mine = copy.deepcopy(candidate).to(device)
        with torch.no_grad():
            expected = _traced(lambda: reference(*[_copy(a) for a in args]))
            own = vars(type(model)).get("forward")  # a forward the problem wrote, not one Model inherits (nn.Linear's)
            code = getattr(own, "__code__", None)
            before = launches.count()
            ran = _runs(code, lambda: _traced(lambda: mine(*[_copy(a) for a in args])))
            launched = launches.count() - before
    except Exception:  # noqa: BLE001 - a candidate or reference that fails here fails its cases
        return None
    if ran is None:
        return None
    called_model, got = ran
    if called_model:
        return MODEL
    ops, theirs = _computing(expected), _computing(got)
    if not launched and ops and ops == theirs:
        return f"calls the problem's own torch op{'s' if len(ops) > 1 else ''} ({', '.join(ops)}) for the whole computation"
    return None


def _copy(a: Any) -> Any:
    return a.clone() if hasattr(a, "clone") else a


def _traced(call) -> list[str]:
    """The names of the torch functions ``call`` calls at the top level (not those they call)."""
    from torch.overrides import TorchFunctionMode

    names: list[str] = []

    class Trace(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            names.append(getattr(func, "__name__", "") or repr(func))
            return func(*args, **(kwargs or {}))

    with Trace():
        call()
    return names


def _computing(names: list[str]) -> list[str]:
    return [n.removesuffix("_") if n.endswith("_") and not n.startswith("_") else n for n in names if n not in NEUTRAL]


def _same(a, b) -> bool:
    return (a.co_name == b.co_name and a.co_code == b.co_code and a.co_consts == b.co_consts
            and a.co_names == b.co_names)


def _runs(code, call) -> tuple[bool, list[str]] | None:
    """(whether a function with ``code``'s code ran during ``call``, what ``call`` returned)."""
    seen = []
    if code is None:
        return False, call()

    def hook(frame, event, arg):
        if event == "call" and not seen and _same(frame.f_code, code):
            seen.append(True)

    previous = sys.getprofile()
    sys.setprofile(hook)
    try:
        value = call()
    finally:
        sys.setprofile(previous)
    return bool(seen), value


def apply_strict(kernels: list[dict], strict: bool) -> None:
    """Under ``--strict`` a kernel flagged as a shortcut fails (``failure_class`` "shortcut")."""
    if not strict:
        return
    for k in kernels:
        if k.get("shortcut") and k.get("passed"):
            k.update(passed=False, verdict=Verdict.FAIL, failure_class=FailureClass.SHORTCUT, strict=True)
