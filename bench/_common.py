"""Pieces shared by the bench definitions of the row-wise ops (not a bench itself: the leading
underscore keeps it out of ``python -m harness bench --op``)."""

from __future__ import annotations

import torch

DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


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
