"""Pieces shared by the bench definitions (not a bench itself: the leading underscore keeps it
out of ``python -m harness bench --op``): dtype names and sizes, seeded inputs, the workload
list of a set of shapes, the torch.compile column and the Liger-Kernel column."""

from __future__ import annotations

import importlib
from typing import Callable, Mapping, Sequence

import torch

from harness.workflows.benchmark import Unavailable, Workload

DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


class Draws:
    """A bench's inputs, the same on every run: one generator seeded 0 on ``device``; normal
    draws are made in float32 and cast to ``dtype``."""

    def __init__(self, device: str, dtype: torch.dtype):
        self.device, self.dtype = device, dtype
        self.gen = torch.Generator(device=device).manual_seed(0)

    def normal(self, shape, *, scale: float | None = None, shift: float | None = None) -> torch.Tensor:
        """N(shift, scale**2) in ``dtype`` (the scale and shift applied in float32, before the cast)."""
        x = torch.randn(shape, generator=self.gen, device=self.device, dtype=torch.float32)
        if scale is not None:
            x = x * scale
        if shift is not None:
            x = x + shift
        return x.to(self.dtype)

    def targets(self, n: int, classes: int, ignore_index: int) -> torch.Tensor:
        """Class indices in [0, classes), every tenth row ``ignore_index`` (padding tokens, as in a real batch)."""
        target = torch.randint(classes, (n,), generator=self.gen, device=self.device)
        target[::10] = ignore_index
        return target


def workloads_of(shapes: Sequence[tuple], make: Callable, bytes_of: Callable[[int, int, int], dict], *,
                 name: str = "{0}x{1} {dtype}", targets_us: Mapping[tuple, dict] | None = None,
                 limits: Mapping[tuple, dict] | None = None) -> list[Workload]:
    """One Workload per ``(a, b, dtype, quick)`` of ``shapes``: ``make(a, b, dtype)`` builds its
    inputs, ``bytes_of(a, b, element size)`` its minimal bytes per mode, ``name`` its name (a
    format of a, b and the dtype's name); ``targets_us`` and ``limits`` are keyed by ``(a, b)``."""
    return [
        Workload(
            name=name.format(a, b, dtype=DTYPE_NAMES[dtype]),
            make=make(a, b, dtype),
            bytes=bytes_of(a, b, element_size(dtype)),
            quick=quick,
            targets_us=(targets_us or {}).get((a, b), {}),
            limits=(limits or {}).get((a, b), {}),
        )
        for a, b, dtype, quick in shapes
    ]


def compiled(fn):
    """torch.compile of ``fn``, compiled on first use (during the warm-up calls); dynamic=False
    keeps one specialised graph per shape, as a model with fixed shapes gets."""
    graph = None

    def run(*args):
        nonlocal graph
        if graph is None:
            graph = torch.compile(fn, dynamic=False)
        return graph(*args)

    return run


def liger_column(module: str, function: str, call: Callable) -> Callable | Unavailable:
    """The Liger-Kernel implementation: ``call(Function, *args)`` applies Liger's autograd
    Function ``module.function`` the way its forward wants; Unavailable where Liger cannot be
    imported (not installed, or built for another triton), so the column is skipped."""
    try:
        found = getattr(importlib.import_module(module), function)
    except Exception as exc:  # any import failure only skips the column; its message goes in the report
        return Unavailable.liger(exc)

    def liger(*args):
        return call(found, *args)

    return liger
