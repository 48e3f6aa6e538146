"""Hypothesis building blocks shared by every op: sizes, dtypes, layouts, value kinds, seeds.

Strategies validate their arguments when built (keyword-only), and lean on special values
that expose bugs: 1, block sizes and their neighbours (k*BLOCK +- 1), primes.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import torch
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

__all__ = ["DTYPES", "LAYOUTS", "boundary_sizes", "dtypes", "layouts", "seeds", "sizes", "dtype_name", "dtype_from_name"]

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "transposed", "col_sliced", "offset")
PRIMES = (2, 3, 5, 7, 13, 31, 61, 127, 251, 257, 509, 1021, 2039, 4093, 8191)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype name {name!r}; expected one of {[dtype_name(d) for d in DTYPES]}")
    return dtype


def _check_int(name: str, value: object, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidArgument(f"{name}={value!r} must be an int >= {low}")
    return value


def boundary_sizes(*, max_value: int, blocks: Iterable[int] = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)) -> list[int]:
    """1, each block size and its neighbours (k*BLOCK - 1, k*BLOCK, k*BLOCK + 1), primes; all <= max_value."""
    _check_int("max_value", max_value, 1)
    out = {1}
    for b in blocks:
        _check_int("block", b, 1)
        out.update({b - 1, b, b + 1, 3 * b // 2 + 1})
    out.update(PRIMES)
    return sorted(v for v in out if 1 <= v <= max_value)


def sizes(*, min_value: int = 1, max_value: int, special: Sequence[int] = ()) -> st.SearchStrategy[int]:
    """A dimension: half the time one of ``special`` (within range), otherwise any int in range."""
    _check_int("min_value", min_value, 0)
    _check_int("max_value", max_value, 0)
    if min_value > max_value:
        raise InvalidArgument(f"min_value={min_value} > max_value={max_value}; swap them")
    picks = sorted({_check_int("special value", s, 0) for s in special if min_value <= s <= max_value})
    anything = st.integers(min_value, max_value)
    return st.one_of(st.sampled_from(picks), anything) if picks else anything


def dtypes(*, allowed: Sequence[torch.dtype] = DTYPES) -> st.SearchStrategy[torch.dtype]:
    bad = [d for d in allowed if d not in DTYPES]
    if not allowed or bad:
        raise InvalidArgument(f"allowed dtypes must be a non-empty subset of {DTYPES}, got {tuple(allowed)}")
    return st.sampled_from(tuple(allowed))


def layouts(*, allowed: Sequence[str] = LAYOUTS) -> st.SearchStrategy[str]:
    bad = [l for l in allowed if l not in LAYOUTS]
    if not allowed or bad:
        raise InvalidArgument(f"unknown layout(s) {bad or '(none given)'}; choose from {LAYOUTS}")
    return st.sampled_from(tuple(allowed))


def seeds() -> st.SearchStrategy[int]:
    return st.integers(0, 2**31 - 1)
