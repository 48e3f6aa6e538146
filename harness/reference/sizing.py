"""Sizes that fit the machine: a KernelBench problem's sizes scaled down with its structure kept.

A problem's ``get_inputs()`` and ``get_init_inputs()`` read module-level sizes (``batch_size =
4096``, ``dim = 393216``, ``input_shape = (32768,)``). The inputs' shapes are read without
allocating anything (``get_inputs()`` and Model's forward under the ``meta`` device); where the
largest tensor (an input or the output) exceeds the budget, every module-level integer that is
one of the inputs' or the output's dims is scaled by one factor: ``n -> max(floor, round(n * f))``, the same
function of ``n`` for every size, so sizes that were equal stay equal (a tied dim), ratios are
kept down to the floor, and the constructor's arguments (channels, normalised shape) follow the
inputs. Integers that are no input dim (kernel size, stride, dilation, groups, a reduced axis)
are kept, and a constructor's scaled size stays a multiple of each kept one that divided it
(channels of groups; a batch, which no constructor sees, is tied to none), at least twice it
where it was and the budget allows (4096
features in 64 groups scale to no fewer than 128: groups of one feature would normalise nothing). The floor starts at the largest small kept integer (a kernel never wider than its
input) and doubles until the reference accepts the scaled inputs (float32, small).

On a GPU the problem's real sizes also run, as one case of their own, where its memory fits:
the inputs, their float64 copies and the output in both the case's dtype and float64, read on
the meta device before anything is allocated (``footprint``), ``REAL_MARGIN`` times over within
the GPU's free memory (``real_case``). The declaration's probing (which dims vary, their lower
bounds, the output's shape) runs at the scaled sizes, as every other case does; the report
states both. The case needs the example's fixed dims (those the weights set) unscaled: a
problem whose scaling shrank one (channels) runs at the scaled sizes only, and says so.

The budget, per tensor: on the CPU interpreter ``ELEMENTS``, on a GPU ``GPU_ELEMENTS``
(harness.ops.derive's per-tensor budgets of a case, what every declared op's cases get), and
on a GPU also what fits the free memory with the inputs and output held ``GPU_COPIES`` times
over (float64 copies, the candidate's output, its gradients). A problem within the budget runs
at its real sizes. The budget is per tensor, not per device, because the sizes are those of
every case, not of one: the declaration tries the float64 reference on the host at the example's
sizes (which dims vary, their lower bounds, the output's shape per case), and a floor case per
layout and value kind keeps the example's fixed dims. At KernelBench's real sizes (a
1.6e9-element ReLU) no verdict came within 150 s on an H100 (2026-12-07, docs/gpu-runs.md):
sizes past the budget buy no check the floor's layouts, ``beyond``'s 4x cases and the
index-width layouts (offsets past 2**31) do not make on purpose.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from vocabulary import Backend

ELEMENTS = 1 << 15  # the CPU interpreter's largest tensor (harness.ops.derive.BUDGET["interpreter"])
GPU_ELEMENTS = 1 << 22  # a GPU case's largest tensor (harness.ops.derive.BUDGET["cuda"])
GPU_COPIES = 12
FLOOR = 4
FLOOR_TRIES = 4
REAL_MARGIN = 2.0  # the real sizes' case needs its footprint this many times over in free memory
KERNEL = 16  # a kept size at most this (a kernel size, a stride, a dilation) floors the scaled ones


class DoesNotFit(Exception):
    """The problem's inputs exceed the budget and no module-level size scales them down."""


@dataclass
class Scaling:
    """What ``fit`` changed: each module-level size's (old, new), and the largest tensor before and after."""

    sizes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    factor: float = 1.0
    largest_before: int = 0
    largest_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    budget: str = ""
    # on a GPU, where the sizes were scaled: whether the real sizes run as one case of their own
    # (``real_case``), and why or why not
    real: bool = False
    real_why: str = ""

    @property
    def scaled(self) -> bool:
        return bool(self.sizes)

    def text(self) -> str:
        if not self.scaled:
            return f"real sizes ({_bytes(self.bytes_before)} of inputs; {self.budget})"
        changes = ", ".join(f"{k} {_show(a)}->{_show(b)}" for k, (a, b) in self.sizes.items())
        return (f"scaled down to fit ({self.budget}): {changes}; inputs {_bytes(self.bytes_before)} -> "
                f"{_bytes(self.bytes_after)}" + (f"; {self.real_why}" if self.real_why else ""))

    def record(self) -> dict:
        return {"scaled": self.scaled, "sizes": {k: [_plain(a), _plain(b)] for k, (a, b) in self.sizes.items()},
                "factor": self.factor, "largest_tensor_before": self.largest_before,
                "largest_tensor_after": self.largest_after, "input_bytes_before": self.bytes_before,
                "input_bytes_after": self.bytes_after, "budget": self.budget, "real_case": self.real,
                "real_case_why": self.real_why}


def _plain(v):
    return list(v) if isinstance(v, tuple) else v


def _show(v) -> str:
    return f"({', '.join(map(str, v))})" if isinstance(v, tuple) else str(v)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _ints(module) -> dict[str, Any]:
    """The module-level sizes: ints and tuples of ints (not bools, not private names)."""
    out = {}
    for k, v in vars(module).items():
        if k.startswith("_"):
            continue
        if type(v) is int or (isinstance(v, tuple) and v and all(type(x) is int for x in v)):
            out[k] = v
    return out


def measure(module, model_cls: Callable | None = None) -> tuple[list[tuple[tuple[int, ...], int]], tuple | None]:
    """The example inputs' (shape, bytes) and the output's shape (None where the forward cannot run
    on the meta device), allocating nothing."""
    torch.manual_seed(0)
    with torch.device("meta"):
        inputs = list(module.get_inputs())
        shapes = [(tuple(t.shape), t.numel() * t.element_size()) for t in inputs if isinstance(t, torch.Tensor)]
        out_shape = None
        if model_cls is not None:
            try:
                model = model_cls(*module.get_init_inputs())
                with torch.no_grad():
                    out = model(*inputs)
                out = out[0] if isinstance(out, (tuple, list)) and out else out
                out_shape = tuple(out.shape) if isinstance(out, torch.Tensor) else None
            except Exception:  # noqa: BLE001 - an op without a meta kernel: the inputs alone are sized
                out_shape = None
    return shapes, out_shape


def footprint(module, model_cls: Callable) -> int | None:
    """The bytes one case at ``module``'s current sizes holds at least, read on the meta device
    (nothing allocated): each input, a float64 copy of each float input, and each output in its
    own dtype and in float64 (the oracle's). None where the forward cannot run on the meta device."""
    torch.manual_seed(0)
    try:
        with torch.device("meta"):
            inputs = list(module.get_inputs())
            model = model_cls(*module.get_init_inputs())
            with torch.no_grad():
                out = model(*inputs)
    except Exception:  # noqa: BLE001 - no meta kernel: the footprint is unknown, the real sizes not run
        return None
    outs = out if isinstance(out, (tuple, list)) else (out,)
    total = 0
    for t in inputs:
        if isinstance(t, torch.Tensor):
            total += t.numel() * (t.element_size() + (8 if t.is_floating_point() else 0))
    for o in outs:
        if isinstance(o, torch.Tensor):
            total += o.numel() * (o.element_size() + 8)
    return total


def real_case(need: int | None, free: int) -> tuple[bool, str]:
    """Whether a case at the real sizes, of ``need`` bytes (``footprint``), runs on a GPU with
    ``free`` bytes free: ``REAL_MARGIN`` times over (the candidate's own intermediates, the
    oracle's rounding spread); and the report's words for it."""
    if need is None:
        return False, "real sizes not run: their memory could not be read on the meta device"
    if need * REAL_MARGIN <= free:
        return True, f"plus one case at the real sizes ({_bytes(need)} of tensors, {_bytes(free)} free on the GPU)"
    return False, (f"real sizes not run: {_bytes(need)} of tensors, {REAL_MARGIN:g}x that is over the GPU's "
                   f"{_bytes(free)} free")


def _largest(shapes, out_shape) -> int:
    sizes = [math.prod(s) for s, _ in shapes] + ([math.prod(out_shape)] if out_shape is not None else [])
    return max(sizes, default=0)


def _total(shapes, out_shape, itemsize: int = 4) -> int:
    return sum(b for _, b in shapes) + (math.prod(out_shape) * itemsize if out_shape is not None else 0)


def _init_ints(module) -> list[int]:
    """The ints among the constructor's arguments (``get_init_inputs()``; none where it fails)."""
    try:
        args = list(module.get_init_inputs())
    except Exception:  # noqa: BLE001 - the caller reports it when it builds the model
        return []
    return [n for a in args for n in (a if isinstance(a, (tuple, list)) else (a,)) if type(n) is int]


def _scaled(v, f: float, floor: int, step: dict[int, int], groups: frozenset = frozenset()):
    def one(n: int) -> int:
        if n not in step or n <= floor:
            return n
        m = step[n]  # a multiple of each kept size that divides n (groups divide channels)
        # and at least two of them where it had as many: a group of one channel is a normalisation
        # of nothing (x - mean(x) = 0 exactly), a structure the problem did not have
        least = m * min(n // m, 2) if m > 1 and n in groups else 0
        return min(n, max(-(-floor // m) * m, least, round(n * f / m) * m))
    return tuple(one(n) for n in v) if isinstance(v, tuple) else one(v)


def _apply(module, sizes: dict[str, Any]) -> None:
    for k, v in sizes.items():
        setattr(module, k, v)


def real_dims(module, decl_inputs, example: dict[str, int], fixed: tuple[str, ...]) -> tuple[dict[str, int] | None, str]:
    """The op's dims at the problem's real sizes (``module``'s original ones, read on the meta
    device; its fitted sizes restored after), or None and why where they are no case of the op:
    a fixed dim (one the weights set) differs from the scaled example's."""
    original = getattr(module, "_harness_original_sizes", None)
    if not original:
        return None, "real sizes not run: the problem's sizes are unknown"
    now = {k: getattr(module, k) for k in original}
    _apply(module, original)
    try:
        torch.manual_seed(0)
        with torch.device("meta"):
            tensors = [t for t in module.get_inputs() if isinstance(t, torch.Tensor)]
    finally:
        _apply(module, now)
    named = [i for i in decl_inputs if hasattr(i, "shape")]
    dims: dict[str, int] = {}
    for inp, t in zip(named, tensors):
        for d, n in zip(inp.shape, t.shape):
            if dims.setdefault(d, int(n)) != int(n):
                return None, f"real sizes not run: dim {d} is {dims[d]} and {int(n)} there"
    scaled = sorted(d for d in fixed if dims.get(d, example[d]) != example[d])
    if scaled:
        return None, (f"real sizes not run: the weights' dims {', '.join(scaled)} were scaled "
                      f"({', '.join(f'{d} {dims[d]}->{example[d]}' for d in scaled)})")
    return {d: dims.get(d, n) for d, n in example.items()}, ""


def apply_fitted(module, sizes: dict[str, Any]) -> Scaling:
    """The sizes ``fit`` chose (in another process, for the same file) applied to ``module`` as
    they are: nothing measured, nothing probed. The Scaling returned holds the sizes only."""
    original = dict(getattr(module, "_harness_original_sizes", None) or _ints(module))
    module._harness_original_sizes = original
    unknown = sorted(set(sizes) - set(original))
    if unknown:
        raise ValueError(f"no module-level size {', '.join(unknown)} to set")
    _apply(module, {**original, **sizes})
    return Scaling(sizes={k: (original[k], v) for k, v in sizes.items() if v != original[k]}, budget="fitted elsewhere")


def fit(module, model_cls: Callable, *, backend: str, accepts: Callable[[], bool] | None = None,
        free_memory: int | None = None) -> Scaling:
    """Scale ``module``'s sizes in place to fit ``backend`` (module docstring); ``accepts()`` runs
    the reference on the scaled inputs (the floor doubles until it does). Returns what changed,
    and on a GPU whether the real sizes run too (``free_memory``: the GPU's free bytes, read
    from the device where None)."""
    original = dict(getattr(module, "_harness_original_sizes", None) or _ints(module))
    module._harness_original_sizes = original
    _apply(module, original)
    shapes, out_shape = measure(module, model_cls)
    largest, total = _largest(shapes, out_shape), _total(shapes, out_shape)
    scaling = Scaling(largest_before=largest, largest_after=largest, bytes_before=sum(b for _, b in shapes),
                      bytes_after=sum(b for _, b in shapes))
    limit = ELEMENTS
    if backend == Backend.CUDA:
        free, _ = torch.cuda.mem_get_info() if free_memory is None else (free_memory, None)
        limit = GPU_ELEMENTS if total * GPU_COPIES <= free else min(
            GPU_ELEMENTS, max(ELEMENTS, int(largest * free / (total * GPU_COPIES))))
        scaling.budget = f"GPU, at most {limit} elements a tensor ({_bytes(free)} free)"
        if largest <= limit:
            return scaling
    else:
        scaling.budget = f"CPU interpreter, at most {limit} elements a tensor"
        if largest <= limit:
            return scaling
    dims = {n for s, _ in shapes for n in s} | set(out_shape or ())
    scalable_names = {k: v for k, v in original.items()
                      if any(n in dims for n in (v if isinstance(v, tuple) else (v,)))}
    if not scalable_names:
        raise DoesNotFit(f"its largest tensor has {largest} elements, over the budget ({scaling.budget}), and no "
                         "module-level size (an int such as batch_size = 4096) is one of the inputs' dims; "
                         "define the sizes get_inputs() uses as module-level ints so they can be scaled")
    kept = [n for k, v in original.items() if k not in scalable_names
            for n in (v if isinstance(v, tuple) else (v,)) if 0 < n]
    floor = max([FLOOR, *(n for n in kept if n <= KERNEL)])
    scalable = {n for v in scalable_names.values() for n in (v if isinstance(v, tuple) else (v,)) if n in dims}
    # a constructor's size (features, channels) stays a multiple of each kept one that divides it
    # (its groups), and keeps groups of at least two where the budget allows it at the smallest
    # sizes; a size the constructor never sees (a batch) is tied to no kept one: a batch of 1024
    # that 256 groups divide is no multiple of them, and held to one it left no room for the
    # groups of two (8192 features in 256 groups at 256 x 256 elements)
    groups = frozenset(_init_ints(module))
    step = {n: math.lcm(*[k for k in kept if 1 < k < n and n % k == 0] or [1]) if n in groups else 1
            for n in scalable}
    _apply(module, {k: _scaled(v, 0.0, floor, step, groups) for k, v in scalable_names.items()})
    if _largest(*measure(module, model_cls)) > limit:
        groups = frozenset()
    for attempt in range(FLOOR_TRIES):
        lo, hi = 0.0, 1.0  # the largest factor whose largest tensor fits
        for _ in range(30):
            f = (lo + hi) / 2
            _apply(module, {k: _scaled(v, f, floor, step, groups) for k, v in scalable_names.items()})
            s, o = measure(module, model_cls)
            if _largest(s, o) <= limit:
                lo = f
            else:
                hi = f
        new = {k: _scaled(v, lo, floor, step, groups) for k, v in scalable_names.items()}
        _apply(module, new)
        if accepts is None or accepts() or attempt == FLOOR_TRIES - 1:
            break
        floor *= 2
    if backend == "cuda" and new != {k: original[k] for k in new}:
        _apply(module, original)
        scaling.real, scaling.real_why = real_case(footprint(module, model_cls), free)
        _apply(module, new)
    shapes_after, out_after = measure(module, model_cls)
    scaling.sizes = {k: (original[k], v) for k, v in new.items() if v != original[k]}
    scaling.factor = lo
    scaling.largest_after = _largest(shapes_after, out_after)
    scaling.bytes_after = sum(b for _, b in shapes_after)
    return scaling
