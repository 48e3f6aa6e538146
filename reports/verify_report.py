"""verify.json: one entry per kernel and one per (kernel, check, case) record.

Fields (a contract for outside tools): top level ``backend``, ``versions``, ``seed``,
``kernels: [{op, name, passed, cases, failed}]``, ``cases: [{op, kernel, check, case_id,
shape, dtype, layout, max_abs_err, max_rel_err, atol, rtol, mismatched, worst_index, passed,
repro}]``; extra fields are additions.

A kernel's ``verdict`` is "pass", "pass (forward only)", "fail" or "not verified": a kernel that failed nothing but
was never compared with its oracle (every case outside its contract), or whose op's value
checks (``value_checks``: the forward output and each gradient) were not each compared at
least once, proves nothing, so it does not pass (``passed`` is false) unless the run allows
it (``allow_unverified``). A kernel declared ``Contract(forward_only=True)`` (``forward_only: true``) is
asked for no gradient: its value checks are the forward's, and passing them is "pass (forward only)"
(``passed`` true), a verdict of its own. So is a kernel that waives every gradient check
(``Contract(waive={"dx": ...})``, the way inference kernels were declared before ``forward_only``) and
gave none that was compared: ``forward_only`` says that only the forward was checked. A waived
gradient check never compared is not required of a kernel that gave other gradients either. Value comparisons are counted from the records alone: a record
with ``max_abs_err`` set is one.
An inconclusive record (``inconclusive``: why; check ``out_of_memory``, the judge's own inputs or
oracle twice found the GPU full) has ``passed: true`` and counts as neither passed nor failed; a
kernel that failed nothing but has one is "not verified" with that reason.
Waivers (a kernel's declared deviations): a waived record has ``passed: true`` and ``waived``: the
reason; it counts as neither passed nor failed. A kernel summary has ``waived`` (waived check
records), ``waivers`` ({check: reason}, as declared) and ``stale_waivers`` (declared checks that ran
and never failed: the waiver can go).
Failure class: a failed kernel has ``failure_class`` "precision" when every failed check record is a
value comparison whose worst error is within ``PRECISION_UNITS`` (vocabulary.records) roundings of its terms
(``rounding_units``: another rounding order, an intermediate in a narrower type, exp(x - lse) in
fp32), else "error" (beyond what rounding explains, non-finite, a crash, a wrong shape, a write
into an input). The label every report shows is :func:`verdict_label`: "FAIL (precision)" for the
first; a precision choice is declared with ``Contract(precision=...)``, never assumed. A failed
kernel whose every failure is a clean refusal (``refused``: the forward raised a clear error with a
message before any launch, its inputs unchanged, on a shape it does not support) is "refused",
"FAIL (refused)": still a failure while the limit is undeclared, and its summary's ``refused``
({cases, types, said, declaration}) names the one-line declaration that accepts it
(:func:`refusal_line`). A kernel with other failures too is classed by those.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable

from vocabulary import PASSING, Check, FailureClass, JobStatus, Verdict
from vocabulary.records import PRECISION_UNITS, REJECTIONS, SELF_LIMITS, CaseStatus, KernelSummary, case_status


def worst_ratio(ratios: Iterable[float | None]) -> float | None:
    """The largest error ratio, where NaN outranks everything (max() would keep whichever came
    first, so a NaN case could hide behind a small finite worst), then inf; None if none."""
    values = [r for r in ratios if r is not None]
    if any(math.isnan(r) for r in values):
        return math.nan
    return max(values, default=None)


def _unverified(records: list[dict], value_checks) -> str:
    """Why the records do not verify the kernel ('' if they do)."""
    inconclusive = [r for r in records if r.get("inconclusive")]
    if inconclusive:
        return (f"{len(inconclusive)} case(s) inconclusive, {inconclusive[0]['inconclusive']}: the judge could not "
                f"run them, e.g. {inconclusive[0]['case_id']}; not the kernel's doing: run again with the GPU to itself")
    if not any(r["check"] != Check.CONTRACT for r in records):
        return "no case inside the kernel's contract ran: nothing was compared with the oracle"
    compared = {r["check"] for r in records if r.get("max_abs_err") is not None}
    missing = [c for c in value_checks or () if c not in compared]
    if missing:
        return f"never compared with the oracle: {', '.join(missing)}"
    if not compared:
        return "no output was compared with the oracle"
    return ""


def _waived_uncompared(records: list[dict], value_checks, waivers: dict | None) -> list[str]:
    """The op's gradient checks (``value_checks`` after the forward's) that the kernel waives and
    that no record compared with the oracle: declared deviations, not required of it."""
    compared = {r["check"] for r in records if r.get("max_abs_err") is not None}
    return [c for c in list(value_checks or ())[1:] if c in (waivers or {}) and c not in compared]


def failure_class(records: list[dict], status: str = JobStatus.OK) -> str | None:
    """"refused" | "precision" | "error" for a failed kernel's records (None: nothing failed)."""
    failed = [r for r in records if not r["passed"]]
    if not failed and status == JobStatus.OK:
        return None
    if status == JobStatus.OK and all(r.get("refused") for r in failed):
        return FailureClass.REFUSED
    failed = [r for r in failed if not r.get("refused")] or failed  # a refusal is not what sets the class
    precision = status == JobStatus.OK and all(
        r.get("rounding_units") is not None and math.isfinite(r["rounding_units"]) and r["rounding_units"] <= PRECISION_UNITS
        for r in failed)
    return FailureClass.PRECISION if precision else FailureClass.ERROR



def _last_dim(record: dict) -> int | None:
    """The last dimension of a record's first tensor input (what ``Contract(max_n=...)`` bounds)."""
    shape = (record.get("shape") or [[]])[0]
    return shape[-1] if shape else None


def refusals(records: list[dict]) -> dict | None:
    """The cases the kernel refused cleanly (records with ``refused``) and the declaration that
    accepts them: ``Contract(max_n=N)`` where every refused case is longer than every other case that
    ran (N: one below the shortest refused), else (or where only it takes the exceptions as raised:
    AssertionError) ``Contract(self_limits=True)``; an exception the
    declaration does not take as a rejection must become a ValueError (no declaration takes a
    RuntimeError: a crash raises one too; past max_n, an AssertionError neither). None: no refusal."""
    refused = [r for r in records if r.get("refused") and not r["passed"]]
    if not refused:
        return None
    ids = {r["case_id"] for r in refused}
    others = [_last_dim(r) for r in records if r["case_id"] not in ids and r["check"] != Check.CONTRACT]
    longest = max((n for n in others if n is not None), default=0)
    shortest = min((_last_dim(r) or 0) for r in refused)
    types = Counter(r["refused"] for r in refused)
    options = [("Contract(self_limits=True)", SELF_LIMITS)]
    if shortest - 1 >= max(longest, 1):  # a length limit: said as one
        options.insert(0, (f"Contract(max_n={shortest - 1})", REJECTIONS))
    # the first that accepts the refusals as they are raised, else the first
    declaration, accepted = next((o for o in options if set(types) <= set(o[1])), options[0])
    unaccepted = sorted(set(types) - set(accepted))
    if unaccepted:
        declaration += f", raising ValueError there rather than {' or '.join(unaccepted)}"
    said = refused[0]["message"].removeprefix("in-contract input, but the kernel raised ").split("; ")[0]
    return {"cases": len(ids), "types": dict(types), "said": said[:300], "declaration": declaration,
            "case_ids": sorted(ids)}


def refusal_line(kernel: dict) -> str:
    """One line for every report: what the kernel refused and the declaration that accepts it ('' if none)."""
    r = kernel.get("refused")
    if not r:
        return ""
    return (f"{kernel['name']}: {r['cases']} in-contract case(s) refused cleanly before anything was written "
            f"({r['said']}); a failure while the limit is undeclared: declare it with {r['declaration']}")


def verdict_label(kernel: dict) -> str:
    """What every report shows for a kernel: PASS, PASS (forward only), FAIL, FAIL (precision),
    FAIL (<status>), NOT VERIFIED, ERROR (harness); a passing kernel flagged as a shortcut (``shortcut``:
    it calls the reference, harness.shortcut) gets " [shortcut]", and fails as FAIL (shortcut) under
    ``verify --strict``."""
    if kernel.get("verdict") == Verdict.ERROR:
        return "ERROR (harness)"
    if kernel.get("verdict") == Verdict.NOT_VERIFIED:
        return "NOT VERIFIED"
    if kernel.get("passed"):
        label = "PASS (forward only)" if kernel.get("verdict") == Verdict.PASS_FORWARD_ONLY else "PASS"
        return f"{label} [shortcut]" if kernel.get("shortcut") else label
    if kernel.get("status") not in (None, JobStatus.OK):
        return f"FAIL ({kernel['status']})"
    return {FailureClass.PRECISION: "FAIL (precision)", FailureClass.REFUSED: "FAIL (refused)",
            FailureClass.SHORTCUT: "FAIL (shortcut)"}.get(kernel.get("failure_class"), "FAIL")


def self_limited(records: list[dict]) -> dict | None:
    """The cases a kernel rejected itself (``Contract(self_limits=True)``) and the coverage they
    leave: which layouts, dtypes and shapes were rejected, and the case ids (None: no such case)."""
    limited = [r for r in records if r.get("self_limited")]
    if not limited:
        return None
    return {
        "cases": len(limited),
        "layouts": dict(Counter(r["layout"] for r in limited)),
        "dtypes": dict(Counter(r["dtype"] for r in limited)),
        "shapes": sorted({str(r["shape"][0] if r.get("shape") else []) for r in limited}),
        "reasons": dict(Counter(r["self_limited"] for r in limited).most_common(5)),
        "case_ids": [r["case_id"] for r in limited],
    }


def stale_waivers(records: list[dict], waivers: dict[str, str]) -> list[str]:
    """Declared waivers whose check ran and never failed."""
    ran = {r["check"] for r in records}
    waived = {r["check"] for r in records if r.get("waived")}
    return sorted(c for c in waivers if c in ran and c not in waived)


def kernel_summary(op: str, name: str, records: list[dict], *, status: str = JobStatus.OK, value_checks=None,
                   waivers: dict | None = None, forward_only: bool = False, **extra) -> KernelSummary:
    """``value_checks``: the op's forward check then its gradients; a ``forward_only`` kernel
    (Contract(forward_only=True)) is held to the first alone."""
    waived = _waived_uncompared(records, value_checks, waivers)
    if value_checks and len(value_checks) > 1 and len(waived) == len(value_checks) - 1:
        forward_only = True  # every gradient waived, none compared: only the forward was checked
    if forward_only and value_checks:
        value_checks = list(value_checks)[:1]
    elif waived:
        value_checks = [c for c in value_checks if c not in waived]
    case_ids = {r["case_id"] for r in records}
    failed_ids = {r["case_id"] for r in records if not r["passed"]}
    unverified = _unverified(records, value_checks) if status == JobStatus.OK and not failed_ids else ""
    passed = Verdict.PASS_FORWARD_ONLY if forward_only else Verdict.PASS
    kernel_verdict = Verdict.FAIL if status != JobStatus.OK or failed_ids else (Verdict.NOT_VERIFIED if unverified else passed)
    if status == JobStatus.HARNESS_ERROR:  # whatever its records say, the run that would judge it did not finish
        kernel_verdict = Verdict.ERROR  # the harness's own code (or an op's declaration) raised: no verdict
    by_check = Counter((r["check"], case_status(r).value) for r in records)
    checks = {}
    for (check, outcome), count in sorted(by_check.items()):
        entry = checks.setdefault(check, {CaseStatus.PASSED.value: 0, CaseStatus.FAILED.value: 0})
        entry[outcome] = entry.get(outcome, 0) + count
    # a waived failure is reported apart (waived, with its reason): it is not the kernel's worst error
    worst = worst_ratio(r.get("err_ratio") for r in records if not r.get("waived"))
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
        "passed": kernel_verdict in PASSING,
        "verdict": kernel_verdict,
        "forward_only": bool(forward_only),
        "failure_class": failure_class(records, status) if kernel_verdict == Verdict.FAIL else None,
        "unverified_reason": unverified or None,
        "value_comparisons": sum(1 for r in records if r.get("max_abs_err") is not None),
        "value_checks": list(value_checks) if value_checks is not None else None,
        "cases": len(case_ids),
        "failed": len(failed_ids),
        "waived": sum(1 for r in records if r.get("waived")),
        "waivers": dict(waivers or {}),
        "stale_waivers": stale_waivers(records, waivers or {}),
        "self_limited": self_limited(records),
        "refused": refusals(records),
        "status": status,
        "checks": checks,
        "worst_err_ratio": worst,
        "time_breakdown": time_breakdown,
        # distinct Triton specialization keys its cases launched: what CUDA compiles for this suite
        "specializations": len({k for r in records for k in (r.get("specializations") or ())}),
        # the kernel hands the whole computation to the reference (harness.shortcut), or None
        "shortcut": next((r["shortcut"] for r in records if r.get("shortcut")), None),
        **extra,
    }


def build(header: dict, kernels: Iterable[dict], records: Iterable[dict], *, allow_unverified: bool = False) -> dict:
    kernels = list(kernels)
    records = list(records)
    accepted = (*PASSING, Verdict.NOT_VERIFIED) if allow_unverified else PASSING
    return {
        **header,
        "passed": all(k.get("verdict", Verdict.PASS if k["passed"] else Verdict.FAIL) in accepted for k in kernels) and bool(kernels),
        "allow_unverified": allow_unverified,
        "kernels": kernels,
        "cases": records,
    }
