"""verify.json: one entry per kernel and one per (kernel, check, case) record.

Fields (a contract for outside tools): top level ``backend``, ``versions``, ``seed``,
``kernels: [{op, name, passed, cases, failed}]``, ``cases: [{op, kernel, check, case_id,
shape, dtype, layout, max_abs_err, max_rel_err, atol, rtol, mismatched, worst_index, passed,
repro}]``; extra fields are additions.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable


def worst_ratio(ratios: Iterable[float | None]) -> float | None:
    """The largest error ratio, where NaN outranks everything (max() would keep whichever came
    first, so a NaN case could hide behind a small finite worst), then inf; None if none."""
    values = [r for r in ratios if r is not None]
    if any(math.isnan(r) for r in values):
        return math.nan
    return max(values, default=None)


def kernel_summary(op: str, name: str, records: list[dict], *, status: str = "ok", **extra) -> dict:
    case_ids = {r["case_id"] for r in records}
    failed_ids = {r["case_id"] for r in records if not r["passed"]}
    by_check = Counter((r["check"], r["passed"]) for r in records)
    checks = {}
    for (check, passed), count in sorted(by_check.items()):
        entry = checks.setdefault(check, {"passed": 0, "failed": 0})
        entry["passed" if passed else "failed"] += count
    worst = worst_ratio(r.get("err_ratio") for r in records)
    phases = {"kernel": 0.0, "compile": 0.0, "oracle": 0.0, "checks": 0.0}
    for r in records:
        for phase, seconds in (r.get("timing") or {}).items():
            phases[phase] = phases.get(phase, 0.0) + seconds
    # the phases are summed over the kernel's shards, so the rest is too: the shards' summed
    # wall time (worker_seconds) when given, else the kernel's wall time (one shard)
    busy = extra.get("worker_seconds", extra.get("seconds"))
    time_breakdown = {f"{k}_s": round(v, 3) for k, v in phases.items()}
    if busy is not None:  # worker start-up, imports, case generation, hypothesis
        time_breakdown["other_s"] = round(max(0.0, busy - sum(phases.values())), 3)
    return {
        "op": op,
        "name": name,
        "passed": status == "ok" and not failed_ids,
        "cases": len(case_ids),
        "failed": len(failed_ids),
        "status": status,
        "checks": checks,
        "worst_err_ratio": worst,
        "time_breakdown": time_breakdown,
        **extra,
    }


def build(header: dict, kernels: Iterable[dict], records: Iterable[dict]) -> dict:
    kernels = list(kernels)
    records = list(records)
    return {
        **header,
        "passed": all(k["passed"] for k in kernels) and bool(kernels),
        "kernels": kernels,
        "cases": records,
    }
