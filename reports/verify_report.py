"""verify.json: one entry per kernel and one per (kernel, check, case) record.

Fields (a contract for outside tools): top level ``backend``, ``versions``, ``seed``,
``kernels: [{op, name, passed, cases, failed}]``, ``cases: [{op, kernel, check, case_id,
shape, dtype, layout, max_abs_err, max_rel_err, atol, rtol, mismatched, worst_index, passed,
repro}]``; extra fields are additions.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable


def kernel_summary(op: str, name: str, records: list[dict], *, status: str = "ok", **extra) -> dict:
    case_ids = {r["case_id"] for r in records}
    failed_ids = {r["case_id"] for r in records if not r["passed"]}
    by_check = Counter((r["check"], r["passed"]) for r in records)
    checks = {}
    for (check, passed), count in sorted(by_check.items()):
        entry = checks.setdefault(check, {"passed": 0, "failed": 0})
        entry["passed" if passed else "failed"] += count
    worst = max((r.get("err_ratio") or 0.0 for r in records if r.get("err_ratio") is not None), default=None)
    return {
        "op": op,
        "name": name,
        "passed": status == "ok" and not failed_ids,
        "cases": len(case_ids),
        "failed": len(failed_ids),
        "status": status,
        "checks": checks,
        "worst_err_ratio": worst,
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
