"""What a kernel's failures have in common: its failed cases counted by dtype, layout and value
kind, and the range of each size parameter, so that 64 failures that are all bfloat16 read as one
line ("64 failed checks on 32 cases: dtype bfloat16 (all); ...") instead of 64.

Read from the records only: dtype and layout are record fields, the value kind and the sizes
(the case id's upper-case parameters) are read from the case id ``op:key=value,...``.
"""

from __future__ import annotations

from collections import Counter

__all__ = ["by_kernel", "group", "group_line", "group_rows"]

ASPECTS = ("dtype", "layout", "values")


def _params(case_id: str) -> dict[str, str]:
    _, _, rest = case_id.partition(":")
    return dict(part.partition("=")[::2] for part in rest.split(",") if "=" in part)


def _number(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def group(failed: list[dict]) -> dict:
    """``failed``: the failed records of one kernel. The distinct failed cases counted per
    dtype, layout and value kind (most first), each size parameter's [min, max] over them, and
    the failed checks per check name."""
    cases: dict[str, dict] = {}
    for r in failed:
        cases.setdefault(r["case_id"], r)
    counts = {aspect: Counter() for aspect in ASPECTS}
    sizes: dict[str, list[int]] = {}
    for case_id, r in cases.items():
        params = _params(case_id)
        for aspect in ASPECTS:
            value = r.get(aspect) if aspect != "values" else None
            value = value or params.get(aspect)
            if value:
                counts[aspect][str(value)] += 1
        for key, value in params.items():
            number = _number(value)
            if key[:1].isupper() and number is not None:
                low_high = sizes.setdefault(key, [number, number])
                low_high[0], low_high[1] = min(low_high[0], number), max(low_high[1], number)
    return {"failed_checks": len(failed), "failed_cases": len(cases),
            "checks": dict(Counter(r["check"] for r in failed).most_common()),
            **{aspect: dict(counts[aspect].most_common()) for aspect in ASPECTS},
            "sizes": sizes}


def _counted(counts: dict[str, int], total: int, limit: int = 4) -> str:
    if len(counts) == 1:
        return f"{next(iter(counts))} (all)"
    items = list(counts.items())
    text = ", ".join(f"{name} ({n})" for name, n in items[:limit])
    return text + (f", {len(items) - limit} more" if len(items) > limit else "")


def group_rows(groups: dict) -> list[tuple[str, str]]:
    """(aspect, what the failed cases hold) rows: checks, dtype, layout, values, sizes."""
    total = groups["failed_cases"]
    rows = [("checks", _counted(groups["checks"], groups["failed_checks"]))]
    rows += [(aspect, _counted(groups[aspect], total)) for aspect in ASPECTS if groups[aspect]]
    if groups["sizes"]:
        rows.append(("sizes", ", ".join(f"{k} {lo}" if lo == hi else f"{k} {lo}..{hi}"
                                        for k, (lo, hi) in groups["sizes"].items())))
    return rows


def group_line(failed: list[dict]) -> str:
    """One line: how many failed checks on how many cases, and what those cases share."""
    groups = group(failed)
    rows = "; ".join(f"{aspect} {text}" for aspect, text in group_rows(groups))
    return f"{groups['failed_checks']} failed check(s) on {groups['failed_cases']} case(s): {rows}"


def by_kernel(cases: list[dict]) -> list[dict]:
    """The failed (not waived) records of a verify report's ``cases``, grouped per kernel in the
    order they first failed: ``{op, kernel, line, rows}`` for each kernel with a failure."""
    failed: dict[tuple[str, str], list[dict]] = {}
    for r in cases:
        if not r.get("passed"):
            failed.setdefault((r.get("op", ""), r.get("kernel", "")), []).append(r)
    return [{"op": op, "kernel": kernel, "line": group_line(records), "rows": group_rows(group(records))}
            for (op, kernel), records in failed.items()]
