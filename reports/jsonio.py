"""Strict JSON for every report: non-finite floats travel as the strings "nan", "inf", "-inf".

A kernel that forgets eps or overflows fp16 gives NaN or infinite errors; Python's json would
write them as the bare tokens NaN / Infinity, which strict parsers (jq, browsers' JSON.parse,
most CI tools) reject. ``dumps`` encodes them as strings and refuses anything else non-strict;
``loads`` turns those three strings back into floats, wherever they appear, so renderers see
numbers again (a string field whose whole value is "nan", "inf" or "-inf" reads back as a float).
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["dumps", "loads", "encode", "decode", "NONFINITE"]

NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def encode(value: Any) -> Any:
    """``value`` with every non-finite float replaced by "nan", "inf" or "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def decode(value: Any) -> Any:
    """The inverse of ``encode``; also reads the bare NaN/Infinity tokens of older reports."""
    if isinstance(value, str):
        return NONFINITE.get(value, value)
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v) for v in value]
    return value


def dumps(data: Any, *, indent: int | None = 1) -> str:
    return json.dumps(encode(data), indent=indent, allow_nan=False)


def loads(text: str) -> Any:
    return decode(json.loads(text))
