"""A third-party function narrowed to the inputs where it passes ``verify``: the *carrier* of a
library mutation campaign (``mutate --mutate-module``; docs/library-mutation.md "How good are your kernel
tests?"). A campaign scores only against a carrier whose unmutated run passes, so where the
library fails some cases (a dtype it is imprecise in, a layout it mishandles), the carrier
declares the narrower contract and rejects the rest itself, before calling the library, as any
kernel must reject out-of-contract inputs. The unrestricted kernels stay registered beside it
and keep reporting those findings.
"""

from __future__ import annotations

import functools

import torch


def narrowed(fn, *, dtypes: tuple[torch.dtype, ...] | None = None, contiguous: bool = False,
             max_last_dim: int | None = None):
    """``fn`` that raises (TypeError / ValueError, nothing written) for tensors outside
    ``dtypes`` (floating-point tensors only: targets keep their integer dtype), with
    ``contiguous`` for any non-contiguous tensor, and with ``max_last_dim`` for a floating-point
    tensor whose last dim is longer."""

    @functools.wraps(fn)
    def carrier(*args, **kwargs):
        for i, a in enumerate(args):
            if not isinstance(a, torch.Tensor):
                continue
            if dtypes is not None and a.is_floating_point() and a.dtype not in dtypes:
                raise TypeError(f"argument {i} has dtype {a.dtype}; this carrier accepts {', '.join(map(str, dtypes))}")
            if contiguous and not a.is_contiguous():
                raise ValueError(f"argument {i} is not contiguous (strides {a.stride()}); this carrier takes contiguous tensors")
            if max_last_dim is not None and a.is_floating_point() and a.dim() and a.shape[-1] > max_last_dim:
                raise ValueError(f"argument {i} has {a.shape[-1]} columns; this carrier takes at most {max_last_dim}")
        return fn(*args, **kwargs)

    return carrier
