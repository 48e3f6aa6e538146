"""Input checks the project's kernels share (the leading underscore keeps this module out of
kernel discovery: it registers nothing). Each raises what a caller of the kernel sees before
anything is allocated or launched: TypeError for a wrong type or dtype, ValueError for a wrong
device; every message names the fix."""

from __future__ import annotations

import os

import torch


def require_tensors(*named: tuple[str, object]) -> None:
    """Every ``(name, value)`` is a tensor."""
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")


def require_float(name: str, t: torch.Tensor, supported: tuple[torch.dtype, ...]) -> None:
    """``t``'s dtype is one the kernel computes in (float32, float16, bfloat16)."""
    if t.dtype not in supported:
        raise TypeError(f"{name} has dtype {t.dtype}; this kernel supports float32, float16 and bfloat16: "
                        f"cast {name} first")


def require_like(name: str, t: torch.Tensor, ref_name: str, ref: torch.Tensor) -> None:
    """``t`` has the dtype and device of ``ref`` (the kernel reads both with one element type)."""
    if t.dtype != ref.dtype:
        raise TypeError(f"{name} has dtype {t.dtype} but {ref_name} has {ref.dtype}; cast {name} to {ref.dtype}")
    if t.device != ref.device:
        raise ValueError(f"{ref_name} is on {ref.device} but {name} on {t.device}; move both to one device")


def require_runnable_device(t: torch.Tensor, subject: str) -> None:
    """``t`` is where Triton can run: a CUDA device, or the CPU under the interpreter.
    ``subject`` opens the message ("x is", "logits are")."""
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    if t.device.type != "cuda" and not (interpreting and t.device.type == "cpu"):
        raise ValueError(f"{subject} on {t.device}: run on a CUDA device, or on the CPU with TRITON_INTERPRET=1")


def as_rows(t):
    """``t[..., N]`` as the [M, N] rows a row-wise kernel takes, M the product of the leading dims:
    a view where the leading dims' strides allow one, else a copy (a batch/seq transposed or
    sequence-sliced view), differentiable either way (the caller reshapes its result back)."""
    import math

    return t.reshape(math.prod(t.shape[:-1]), t.shape[-1])
