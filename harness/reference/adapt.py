"""Inputs and outputs as models have them: bool inputs and integer outputs of a torch reference.

An op's inputs are float tensors, index tensors and scalars, and its output is a float tensor
(harness.ops.reference). A model may take a bool mask (a masked cumulative sum) or return
indices (argmax, argmin). ``Adapted`` gives such a model the op's interface: a bool input is a
float input whose elements are true where positive (the example's mask given as +-1), and an
integer output is returned as a float tensor of the same values (exact below 2^24 in fp32), so
it is compared with the float64 oracle's indices: any index off fails, except where the inputs'
own rounding changes the answer (tied values), which the oracle's spread measures.
"""

from __future__ import annotations

import copy
from typing import Any

import torch


def bool_positions(inputs: list[Any]) -> tuple[int, ...]:
    return tuple(i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor) and a.dtype == torch.bool)


def as_op_inputs(inputs: list[Any]) -> list[Any]:
    """The example inputs with each bool tensor as float32 +1 (true) / -1 (false)."""
    return [a.to(torch.float32) * 2 - 1 if isinstance(a, torch.Tensor) and a.dtype == torch.bool else a for a in inputs]


def as_model_inputs(args, positions: tuple[int, ...]) -> list[Any]:
    return [a > 0 if i in positions and isinstance(a, torch.Tensor) else a for i, a in enumerate(args)]


def as_op_output(out, dtype: torch.dtype):
    """An integer or bool tensor output as ``dtype`` (its values kept), each of a tuple's; anything
    else as it is."""
    if isinstance(out, tuple):
        return tuple(as_op_output(o, dtype) for o in out)
    if isinstance(out, torch.Tensor) and not out.is_floating_point() and not out.is_complex():
        return out.to(dtype)
    return out


class Adapted:
    """``module`` with bool inputs taken as floats (true where positive) and an integer output
    returned as float64 (the oracle's dtype)."""

    def __init__(self, module, positions: tuple[int, ...]) -> None:
        self.module, self.positions = module, positions
        self.forward = module.forward  # the input names (harness.ops.reference)

    def __call__(self, *args):
        out = self.module(*as_model_inputs(args, self.positions))
        first = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
        return as_op_output(out, first.dtype if first is not None else torch.float64)

    def cast(self, dtype: torch.dtype) -> "Adapted":
        """The same adaptation of the module cast to ``dtype`` (harness.ops.reference.in_dtype)."""
        inner = self.module
        inner = copy.deepcopy(inner).to(dtype) if isinstance(inner, torch.nn.Module) else inner.cast(dtype)
        return Adapted(inner, self.positions)
