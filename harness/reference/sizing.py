"""Sizes that fit the machine: a KernelBench problem's sizes scaled down with its structure kept.

A problem's ``get_inputs()`` and ``get_init_inputs()`` read module-level sizes (``batch_size =
4096``, ``dim = 393216``, ``input_shape = (32768,)``). The inputs' shapes are read without
allocating anything (``get_inputs()`` and Model's forward under the ``meta`` device); where the
largest tensor (an input or the output) exceeds the budget, every module-level integer that is
one of the inputs' or the output's dims is scaled by one factor: ``n -> max(floor, round(n * f))``, the same
function of ``n`` for every size, so sizes that were equal stay equal (a tied dim), ratios are
kept down to the floor, and the constructor's arguments (channels, normalised shape) follow the
inputs. Integers that are no input dim (kernel size, stride, dilation, groups, a reduced axis)
are kept, and a scaled size stays a multiple of each kept one that divided it (channels of
groups). The floor starts at the largest small kept integer (a kernel never wider than its
input) and doubles until the reference accepts the scaled inputs (float32, small).

The budget, per tensor: on the CPU interpreter ``ELEMENTS``, on a GPU ``GPU_ELEMENTS``
(properties.derive's per-tensor budgets of a case, what every declared op's cases get), and
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

ELEMENTS = 1 << 15  # the CPU interpreter's largest tensor (properties.derive.BUDGET["interpreter"])
GPU_ELEMENTS = 1 << 22  # a GPU case's largest tensor (properties.derive.BUDGET["cuda"])
GPU_COPIES = 12
FLOOR = 4
FLOOR_TRIES = 4
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

    @property
    def scaled(self) -> bool:
        return bool(self.sizes)

    def text(self) -> str:
        if not self.scaled:
            return f"real sizes ({_bytes(self.bytes_before)} of inputs; {self.budget})"
        changes = ", ".join(f"{k} {_show(a)}->{_show(b)}" for k, (a, b) in self.sizes.items())
        return (f"scaled down to fit ({self.budget}): {changes}; inputs {_bytes(self.bytes_before)} -> "
                f"{_bytes(self.bytes_after)}")

    def record(self) -> dict:
        return {"scaled": self.scaled, "sizes": {k: [_plain(a), _plain(b)] for k, (a, b) in self.sizes.items()},
                "factor": self.factor, "largest_tensor_before": self.largest_before,
                "largest_tensor_after": self.largest_after, "input_bytes_before": self.bytes_before,
                "input_bytes_after": self.bytes_after, "budget": self.budget}


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


def _largest(shapes, out_shape) -> int:
    sizes = [math.prod(s) for s, _ in shapes] + ([math.prod(out_shape)] if out_shape is not None else [])
    return max(sizes, default=0)


def _total(shapes, out_shape, itemsize: int = 4) -> int:
    return sum(b for _, b in shapes) + (math.prod(out_shape) * itemsize if out_shape is not None else 0)


def _scaled(v, f: float, floor: int, step: dict[int, int]):
    def one(n: int) -> int:
        if n not in step or n <= floor:
            return n
        m = step[n]  # a multiple of each kept size that divides n (groups divide channels)
        return min(n, max(-(-floor // m) * m, round(n * f / m) * m))
    return tuple(one(n) for n in v) if isinstance(v, tuple) else one(v)


def _apply(module, sizes: dict[str, Any]) -> None:
    for k, v in sizes.items():
        setattr(module, k, v)


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


def fit(module, model_cls: Callable, *, backend: str, accepts: Callable[[], bool] | None = None) -> Scaling:
    """Scale ``module``'s sizes in place to fit ``backend`` (module docstring); ``accepts()`` runs
    the reference on the scaled inputs (the floor doubles until it does). Returns what changed."""
    original = dict(getattr(module, "_harness_original_sizes", None) or _ints(module))
    module._harness_original_sizes = original
    _apply(module, original)
    shapes, out_shape = measure(module, model_cls)
    largest, total = _largest(shapes, out_shape), _total(shapes, out_shape)
    scaling = Scaling(largest_before=largest, largest_after=largest, bytes_before=sum(b for _, b in shapes),
                      bytes_after=sum(b for _, b in shapes))
    limit = ELEMENTS
    if backend == Backend.CUDA:
        free, _ = torch.cuda.mem_get_info()
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
    step = {n: math.lcm(*[k for k in kept if 1 < k < n and n % k == 0] or [1]) for n in scalable}
    for attempt in range(FLOOR_TRIES):
        lo, hi = 0.0, 1.0  # the largest factor whose largest tensor fits
        for _ in range(30):
            f = (lo + hi) / 2
            _apply(module, {k: _scaled(v, f, floor, step) for k, v in scalable_names.items()})
            s, o = measure(module, model_cls)
            if _largest(s, o) <= limit:
                lo = f
            else:
                hi = f
        new = {k: _scaled(v, lo, floor, step) for k, v in scalable_names.items()}
        _apply(module, new)
        if accepts is None or accepts() or attempt == FLOOR_TRIES - 1:
            break
        floor *= 2
    shapes_after, out_after = measure(module, model_cls)
    scaling.sizes = {k: (original[k], v) for k, v in new.items() if v != original[k]}
    scaling.factor = lo
    scaling.largest_after = _largest(shapes_after, out_after)
    scaling.bytes_after = sum(b for _, b in shapes_after)
    return scaling
