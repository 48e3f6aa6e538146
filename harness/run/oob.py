"""Memory safety in the Triton interpreter: an out-of-bounds load, store or atomic raises.

The interpreter executes ``tl.load``/``tl.store`` as raw reads and writes at the lane
addresses, so a dropped mask or a wrong offset reads garbage, corrupts the heap or
segfaults, and nothing says so. :func:`install` wraps the interpreter in two places:

- the launch (``GridExecutor``): records, for every tensor argument of the kernel as it
  is passed to the launch (after the interpreter's host copy, so the addresses are the
  ones the kernel sees), the byte range it may touch;
- the memory builder calls (``create_masked_load``, ``create_masked_store``,
  ``create_atomic_rmw`` and, where present, ``create_atomic_cas``): before the access,
  every active (unmasked) lane's element ``[addr, addr + itemsize)`` must lie inside one
  of those ranges, otherwise :class:`OutOfBoundsAccess` is raised, naming the kernel,
  the access, the program, the nearest argument and the offset in elements.

Allowed range of an argument: the bytes its *view* spans, from its lowest to its
highest element address (plus one element), not its whole underlying storage. Reading
the padding of a larger storage (a wrong row stride, a missing storage offset) is a
real bug, and the harness's layouts put their views inside NaN-padded storages exactly
to expose it; with the storage rule those accesses would pass. The rule does not see an
access that stays inside the span but hits no element of the view (the gap between the
rows of a column-sliced view): that reads the NaN padding, which the values check
catches, and a write there changes bytes ``inputs_unchanged`` compares. A zero-size
tensor allows nothing. Arguments that are not tensors (ints, floats) allow nothing.

Only accesses through pointers derived from the launch's tensor arguments are legal
under this rule; a kernel that reads memory it was not given is reported even if the
address happens to be valid. The check runs before the access, so the reported access
never happens: no corruption, no segfault.

The guard is active only under ``TRITON_INTERPRET=1`` (on a GPU, use compute-sanitizer).
Checked on triton 3.6 and 3.9, whose builder methods take different arguments: the
wrappers find the pointer and mask parameters by name. If the internals it wraps are
missing (another Triton version), :func:`install` installs nothing, warns once with
:class:`GuardUnavailable` saying what is missing, and :func:`status` reports it; it never
half-installs. Cost: about 45 us per checked access, 1% of the rmsnorm floor's time.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import warnings

import numpy as np

from harness.errors import HarnessError
from harness.settings import current as current_settings

__all__ = [
    "GuardStatus", "GuardUnavailable", "OutOfBoundsAccess", "find_out_of_bounds", "install", "status", "uninstall",
]



class OutOfBoundsAccess(HarnessError):
    """A kernel's unmasked lane addressed memory outside every tensor argument of its launch.

    ``outside_by``: how far the bad lane nearest to ``argument`` lies outside it, in that
    argument's elements: +1 is the first element past its end, -1 the one before its start.
    """

    def __init__(self, message: str, *, kernel: str = "?", access: str = "?", program: tuple = (),
                 argument: str | None = None, arg_index: int | None = None, outside_by: int | None = None):
        super().__init__(message)
        self.kernel, self.access, self.program = kernel, access, program
        self.argument, self.arg_index, self.outside_by = argument, arg_index, outside_by


class GuardUnavailable(RuntimeWarning):
    """The out-of-bounds guard could not be installed on this Triton version."""


@dataclasses.dataclass(frozen=True)
class GuardStatus:
    active: bool
    reason: str


@dataclasses.dataclass(frozen=True)
class _Span:
    name: str
    index: int  # position in the kernel's signature
    dtype: str
    start: int  # bytes [start, end)
    end: int
    itemsize: int


@dataclasses.dataclass
class _Launch:
    kernel: str
    spans: list[_Span] = dataclasses.field(default_factory=list)


# (access kind, method name, required?) of InterpreterBuilder methods to wrap
_ACCESSES = (
    ("load", "create_masked_load", True),
    ("store", "create_masked_store", True),
    ("atomic", "create_atomic_rmw", True),
    ("atomic", "create_atomic_cas", False),
)

_launches: list[_Launch] = []  # a stack: the innermost launch is checked
_originals: list[tuple[object, str, object]] = []
_status = GuardStatus(False, "not installed")
_warned: set[str] = set()  # reasons already warned about: one warning per process


def status() -> GuardStatus:
    return _status


def find_out_of_bounds(exc: BaseException | None) -> OutOfBoundsAccess | None:
    """The OutOfBoundsAccess behind ``exc`` (the interpreter wraps kernel errors), if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OutOfBoundsAccess):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def install(interpreter=None) -> GuardStatus:
    """Install the guard once per process; return what happened. ``interpreter`` is the
    ``triton.runtime.interpreter`` module (tests pass stand-ins)."""
    global _status
    if _status.active:
        return _status
    if interpreter is None:
        if os.environ.get("TRITON_INTERPRET") != "1":
            _status = GuardStatus(False, "TRITON_INTERPRET is not 1: on a GPU use compute-sanitizer instead")
            return _status
        from triton.runtime import interpreter
    problems = _missing_internals(interpreter)
    if problems:
        version = _triton_version()
        _status = GuardStatus(False, f"out-of-bounds guard unavailable on triton {version}: " + "; ".join(problems))
        if _status.reason not in _warned:
            _warned.add(_status.reason)
            warning = _status.reason + ". Out-of-bounds accesses will NOT be reported."
            warnings.warn(warning, GuardUnavailable, stacklevel=2)
        return _status
    builder, executor = interpreter.InterpreterBuilder, interpreter.GridExecutor
    _patch(executor, "__call__", _wrap_launch(executor.__call__, interpreter))
    _patch(executor, "_init_args_hst", _wrap_host_args(executor._init_args_hst))
    for access, method, _ in _ACCESSES:
        original = getattr(builder, method, None)
        if original is not None:
            _patch(builder, method, _wrap_access(original, access, _positions(original)))
    _status = GuardStatus(True, f"out-of-bounds guard active (triton {_triton_version()})")
    return _status


def uninstall() -> None:
    global _status
    while _originals:
        owner, name, original = _originals.pop()
        setattr(owner, name, original)
    _launches.clear()
    _status = GuardStatus(False, "uninstalled")


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except Exception:  # only used in a message
        return "unknown"


def _positions(method) -> tuple[int, int | None] | None:
    """Positions (after self) of the pointer and mask parameters, found by name because
    the other parameters differ between Triton versions; None without a pointer."""
    names = list(inspect.signature(method).parameters)[1:]
    ptr = next((i for i, n in enumerate(names) if n in ("ptrs", "ptr")), None)
    if ptr is None:
        return None
    return ptr, names.index("mask") if "mask" in names else None


def _missing_internals(interpreter) -> list[str]:
    problems = []
    builder = getattr(interpreter, "InterpreterBuilder", None)
    executor = getattr(interpreter, "GridExecutor", None)
    if builder is None:
        problems.append("no InterpreterBuilder")
    else:
        for _, method, required in _ACCESSES:
            fn = getattr(builder, method, None)
            if fn is None:
                if required:
                    problems.append(f"no InterpreterBuilder.{method}")
            elif _positions(fn) is None:
                problems.append(f"InterpreterBuilder.{method} has no ptr/ptrs parameter")
        if not hasattr(interpreter, "interpreter_builder"):
            problems.append("no interpreter_builder instance")
    if executor is None:
        problems.append("no GridExecutor")
    else:
        for method in ("__call__", "_init_args_hst"):
            if method not in vars(executor):
                problems.append(f"no GridExecutor.{method}")
    if not hasattr(interpreter, "InterpreterError"):
        problems.append("no InterpreterError")
    return problems


def _patch(owner, name: str, replacement) -> None:
    _originals.append((owner, name, vars(owner)[name]))
    setattr(owner, name, replacement)


def _wrap_launch(original, interpreter):
    @functools.wraps(original)
    def launch(self, *args, **kwargs):
        _launches.append(_Launch(getattr(self.fn, "__name__", "?")))
        try:
            return original(self, *args, **kwargs)
        except interpreter.InterpreterError as exc:
            oob = find_out_of_bounds(exc)
            if oob is None:
                raise
            raise oob.with_traceback(oob.__traceback__) from None
        finally:
            _launches.pop()

    return launch


def _wrap_host_args(original):
    @functools.wraps(original)
    def host_args(self, args_dev, kwargs):
        args_hst, kwargs_hst = original(self, args_dev, kwargs)
        if _launches:
            names = list(self.arg_names)
            spans = _launches[-1].spans
            spans.clear()
            for i, arg in enumerate(args_hst):
                name = names[i] if i < len(names) else f"arg{i}"
                _collect(spans, name, i, arg)
            for name, arg in kwargs_hst.items():
                _collect(spans, name, names.index(name) if name in names else -1, arg)
        return args_hst, kwargs_hst

    return host_args


def _collect(spans: list[_Span], name: str, index: int, arg) -> None:
    if isinstance(arg, (tuple, list)):
        for j, item in enumerate(arg):
            _collect(spans, f"{name}[{j}]", index, item)
        return
    if not hasattr(arg, "data_ptr"):
        base = getattr(arg, "base", None)  # a TensorDescriptor: its base tensor
        if base is not None and hasattr(base, "data_ptr"):
            _collect(spans, f"{name}.base", index, base)
        return
    tensor = getattr(arg, "base", arg) if type(arg).__name__ == "TensorWrapper" else arg
    if not hasattr(tensor, "stride"):
        return
    start = tensor.data_ptr()
    itemsize = tensor.element_size()
    if tensor.numel() == 0:
        end = start
    else:
        low = sum(min(0, (n - 1) * s) for n, s in zip(tensor.shape, tensor.stride()))
        high = sum(max(0, (n - 1) * s) for n, s in zip(tensor.shape, tensor.stride()))
        start, end = start + low * itemsize, start + (high + 1) * itemsize
    spans.append(_Span(name, index, str(tensor.dtype).removeprefix("torch."), start, end, itemsize))


def _wrap_access(original, access: str, positions):
    ptr_at, mask_at = positions

    @functools.wraps(original)
    def guarded(self, *args, **kwargs):
        if _launches:
            ptrs = args[ptr_at] if ptr_at < len(args) else kwargs.get("ptrs", kwargs.get("ptr"))
            mask = None
            if mask_at is not None:
                mask = args[mask_at] if mask_at < len(args) else kwargs.get("mask")
            _check(access, ptrs, mask, self)
        return original(self, *args, **kwargs)

    return guarded


def _itemsize(ptrs) -> int:
    try:
        return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    except Exception:  # an unexpected handle: fall back to the pointer's pointee size
        return 1


def _check(access: str, ptrs, mask, builder) -> None:
    addr = ptrs.data
    if mask is not None and mask.data is not None:
        active = mask.data
        if active.shape != addr.shape:
            active = np.broadcast_to(active, addr.shape)
        if not active.all():
            addr = addr[active.astype(bool, copy=False)]
    if addr.size == 0:
        return
    itemsize = _itemsize(ptrs)
    lo, hi = int(addr.min()), int(addr.max()) + itemsize
    spans = _launches[-1].spans
    for s in spans:
        if s.start <= lo and hi <= s.end:
            return
    addr = addr.astype(np.int64, copy=False).ravel()
    inside = np.zeros(addr.shape, dtype=bool)
    for s in spans:
        inside |= (addr >= s.start) & (addr + itemsize <= s.end)
    if inside.all():
        return  # lanes spread over several arguments, each lane inside one
    program = getattr(builder, "grid_idx", None)
    message, fields = _describe(access, _launches[-1], addr, addr[~inside], itemsize, program)
    raise OutOfBoundsAccess(message, **fields)


def _describe(access, launch: _Launch, active, bad, itemsize, program):
    program = tuple(int(p) for p in program) if program is not None else ()
    where = f"program ({', '.join(map(str, program))})" if program else "program ?"
    most = current_settings().oob_spans_listed
    listed = ", ".join(f"{s.name}: [{s.start:#x}, {s.end:#x})" for s in launch.spans[:most])
    if len(launch.spans) > most:
        listed += f", ... {len(launch.spans) - most} more"
    head = (
        f"{access} out of bounds in kernel {launch.kernel}: {where}, {bad.size} of {active.size} active lanes "
        f"touch bytes [{int(bad.min()):#x}, {int(bad.max()) + itemsize:#x}), outside every tensor argument "
        f"({listed or 'the launch has no tensor arguments'})"
    )
    nearest = None
    if launch.spans:
        lowest = int(bad.min())

        def distance(s):
            # bytes between each bad lane and the span (0: adjacent); on a tie, the argument the
            # access runs past the end of (the usual bug) wins over one it stops just short of
            gap = np.maximum(np.where(bad < s.start, s.start - (bad + itemsize), bad - s.end), 0)
            return int(gap.min()), 0 if s.end <= lowest else 1

        nearest = min(launch.spans, key=distance)
    if nearest is None:
        msg = head + "; fix: pass the memory as a tensor argument"
        return msg, dict(kernel=launch.kernel, access=access, program=program, argument=None, arg_index=None,
                         outside_by=None)
    size = nearest.itemsize
    count = (nearest.end - nearest.start) // size
    after = bad[bad + itemsize > nearest.end]
    before = bad[bad < nearest.start]
    parts = []
    if after.size:
        first, last = (int(after.min()) - nearest.end) // size + 1, (int(after.max()) - nearest.end) // size + 1
        parts.append(f"offset +{first}" + (f"..+{last}" if last != first else "") + " elements past its end")
        past = first
    if before.size:
        first = (nearest.start - int(before.max()) - 1) // size + 1
        last = (nearest.start - int(before.min()) - 1) // size + 1
        parts.append(f"{first}" + (f"..{last}" if last != first else "") + " elements before its start")
        past = -first if not after.size else past
    msg = (
        f"{head}; nearest argument '{nearest.name}' (arg {nearest.index}, {nearest.dtype}, spans {count} elements), "
        f"{' and '.join(parts)}; fix: mask the {access} (mask=offsets < size) or correct its offset/stride"
    )
    return msg, dict(kernel=launch.kernel, access=access, program=program, argument=nearest.name,
                     arg_index=nearest.index, outside_by=past)
