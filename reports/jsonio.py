"""Strict JSON for every report: non-finite floats travel as the strings "nan", "inf", "-inf".

A kernel that forgets eps or overflows fp16 gives NaN or infinite errors; Python's json would
write them as the bare tokens NaN / Infinity, which strict parsers (jq, browsers' JSON.parse,
most CI tools) reject. ``dumps`` encodes them as strings and refuses anything else non-strict;
``loads`` turns those three strings back into floats, wherever they appear, so renderers see
numbers again (a string field whose whole value is "nan", "inf" or "-inf" reads back as a float).
``loads`` finds those strings in the text (a report of 10 MB holds a few dozen) and parses it once
with the C parser, instead of walking every value of the parsed tree in Python.
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
    """Strict JSON text of ``data``. With ``indent``, the first two levels of containers are laid out
    one item a line and anything deeper is one compact line (a verify.json record, a mutant): Python's
    json indents with its pure-Python encoder (a 13 MB verify.json took about 1 s), the compact
    lines come from its C encoder."""
    if indent is None:
        return _compact(data)
    return _layout(data, indent, 0)


_EXPANDED = 2  # container levels laid out one item a line


def _compact(value: Any) -> str:
    try:  # most values hold no non-finite float: the C encoder alone, no walk
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return json.dumps(encode(value), allow_nan=False)


def _key(key: Any) -> str:
    """A dict key as json writes it (an int, float, bool or None key becomes its JSON text as a string)."""
    return json.dumps(key) if isinstance(key, str) else json.dumps({key: 0})[1:-4]


def _layout(value: Any, indent: int, level: int) -> str:
    if level >= _EXPANDED or not isinstance(value, (dict, list, tuple)) or not value:
        return _compact(value)
    inner, outer = " " * (indent * (level + 1)), " " * (indent * level)
    if isinstance(value, dict):
        items = [f"{inner}{_key(k)}: {_layout(v, indent, level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + f"\n{outer}}}"
    return "[\n" + ",\n".join(f"{inner}{_layout(v, indent, level + 1)}" for v in value) + f"\n{outer}]"


def loads(text: str) -> Any:
    return json.loads(_bare_tokens(text))  # Python's parser reads NaN, Infinity and -Infinity as floats


_TOKENS = {'"nan"': "NaN", '"inf"': "Infinity", '"-inf"': "-Infinity"}
_SPACE = " \t\r\n"


def _bare_tokens(text: str) -> str:
    """``text`` with each string value "nan", "inf", "-inf" written as the bare token Python's
    parser reads as that float. A match is such a string token and never part of another string:
    a quote after a backslash is escaped (inside a string), and a closing quote cannot be followed
    by `nan"`, which is no JSON; one followed by a colon is a key, which stays a string."""
    hits = []
    for quoted, bare in _TOKENS.items():
        at = text.find(quoted)
        while at != -1:
            end = rest = at + len(quoted)
            while rest < len(text) and text[rest] in _SPACE:
                rest += 1
            if (at == 0 or text[at - 1] != "\\") and (rest == len(text) or text[rest] != ":"):
                hits.append((at, end, bare))
            at = text.find(quoted, end)
    if not hits:
        return text
    pieces, last = [], 0
    for at, end, bare in sorted(hits):
        pieces += (text[last:at], bare)
        last = end
    pieces.append(text[last:])
    return "".join(pieces)
