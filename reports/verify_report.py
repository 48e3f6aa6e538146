"""verify.json: one entry per kernel and one per (kernel, check, case) record.

Fields (a contract for outside tools): top level ``backend``, ``versions``, ``seed``,
``kernels: [{op, name, passed, cases, failed}]``, ``cases: [{op, kernel, check, case_id,
shape, dtype, layout, max_abs_err, max_rel_err, atol, rtol, mismatched, worst_index, passed,
repro}]``; extra fields are additions.

Waivers (a kernel's declared deviations): a waived record has ``passed: true`` and ``waived``: the
reason; it counts as neither passed nor failed. A kernel summary has ``waived`` (waived check
records), ``waivers`` ({check: reason}, as declared) and ``stale_waivers`` (declared checks that ran
and never failed: the waiver can go).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable


def verdict(record: dict) -> str:
    """passed | failed | waived (a failure the kernel declares deliberate)."""
    if record.get("waived"):
        return "waived"
    return "passed" if record.get("passed") else "failed"


def stale_waivers(records: list[dict], waivers: dict[str, str]) -> list[str]:
    """Declared waivers whose check ran and never failed."""
    ran = {r["check"] for r in records}
    waived = {r["check"] for r in records if r.get("waived")}
    return sorted(c for c in waivers if c in ran and c not in waived)


def kernel_summary(op: str, name: str, records: list[dict], *, status: str = "ok", waivers: dict | None = None,
                   **extra) -> dict:
    case_ids = {r["case_id"] for r in records}
    failed_ids = {r["case_id"] for r in records if not r["passed"]}
    by_check = Counter((r["check"], verdict(r)) for r in records)
    checks = {}
    for (check, outcome), count in sorted(by_check.items()):
        entry = checks.setdefault(check, {"passed": 0, "failed": 0})
        entry[outcome] = entry.get(outcome, 0) + count
    worst = max((r.get("err_ratio") or 0.0 for r in records if r.get("err_ratio") is not None), default=None)
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
        "waived": sum(1 for r in records if r.get("waived")),
        "waivers": dict(waivers or {}),
        "stale_waivers": stale_waivers(records, waivers or {}),
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
