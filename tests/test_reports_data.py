"""Synthetic verify.json / mutation.json dicts in the documented formats, for the report tests.

Reports read records only, so their tests need no kernel run: these builders give the same
fields ``verify`` and ``mutate`` write, with one passing and one failing kernel.
"""

from __future__ import annotations

HEADER = {
    "backend": "interpreter",
    "device": "CPU (x86_64, Triton interpreter)",
    "versions": {"python": "3.11.7", "torch": "2.13.0+cpu", "triton": "3.9.0", "hypothesis": "6.170.17", "cuda": None},
    "seed": 0,
    "command": "python -m harness verify --backend interpreter --max-examples 5",
    "created": "2026-11-29T13:00:00+00:00",
}
GOOD, BAD = "good_rmsnorm", "bad_rmsnorm"
DTYPES = ("float32", "float16", "bfloat16")
VALUE_CHECKS = ("forward", "dx", "dgamma")
# what a kernel's message may hold: markup, and a control character XML 1.0 forbids
HOSTILE_MESSAGE = "Mismatched elements: 3 / 257 (1.2%)\n<script>alert(1)</script> got \x07 & more"


def _case_id(i: int, dtype: str) -> str:
    return f"rmsnorm:M={i % 7 + 1},N={257 + i},dtype={dtype},layout=contiguous,values=normal,eps=1e-06,seed={1000 + i}"


def record(kernel: str, check: str, i: int, dtype: str, *, passed: bool, err_ratio: float | None) -> dict:
    case_id = _case_id(i, dtype)
    return {
        "op": "rmsnorm", "kernel": kernel, "check": check, "case_id": case_id,
        "shape": [[i % 7 + 1, 257 + i], [257 + i]], "dtype": dtype, "layout": "contiguous", "passed": passed,
        "max_abs_err": None if err_ratio is None else 1e-6 * err_ratio, "max_rel_err": None,
        "atol": None if err_ratio is None else 1e-5, "rtol": None if err_ratio is None else 1e-4,
        "mismatched": None if err_ratio is None else (0 if passed else 3), "worst_index": None if passed else [5],
        "repro": f"python -m harness verify --op rmsnorm --select {kernel} --case {case_id} --backend interpreter",
        "err_ratio": err_ratio, "numel": None if err_ratio is None else (i % 7 + 1) * (257 + i),
        "message": "ok" if passed else HOSTILE_MESSAGE, "phase": "generated", "seconds": 0.01,
    }


def verify_report(n_cases: int = 12, *, bad_every: int = 4) -> dict:
    """GOOD passes every case; BAD fails dgamma on every ``bad_every``-th case (float16 ones
    included by construction) and passes the rest."""
    records = []
    for kernel in (GOOD, BAD):
        for i in range(n_cases):
            dtype = DTYPES[i % len(DTYPES)]
            records.append(record(kernel, "inputs_unchanged", i, dtype, passed=True, err_ratio=None))
            for check in VALUE_CHECKS:
                fails = kernel == BAD and check == "dgamma" and i % bad_every == 0
                ratio = 250.0 + i if fails else (0.0 if check == "forward" and i == 0 else 0.01 * (i + 1))
                records.append(record(kernel, check, i, dtype, passed=not fails, err_ratio=ratio))
    kernels = []
    for kernel in (GOOD, BAD):
        mine = [r for r in records if r["kernel"] == kernel]
        checks: dict[str, dict[str, int]] = {}
        for r in mine:
            entry = checks.setdefault(r["check"], {"passed": 0, "failed": 0})
            entry["passed" if r["passed"] else "failed"] += 1
        failed = {r["case_id"] for r in mine if not r["passed"]}
        kernels.append({
            "op": "rmsnorm", "name": kernel, "passed": not failed, "cases": n_cases, "failed": len(failed),
            "status": "ok", "checks": checks, "worst_err_ratio": max(r["err_ratio"] or 0.0 for r in mine),
            "origin": "plugin", "contract": "dtypes=float32/float16/bfloat16", "plugin": "tests/plugin.py", "seconds": 1.5,
        })
    return {**HEADER, "passed": all(k["passed"] for k in kernels), "kernels": kernels, "cases": records}


def expected_failures(report: dict, kernel: str = BAD) -> int:
    return sum(1 for r in report["cases"] if r["kernel"] == kernel and not r["passed"])


def mutation_report() -> dict:
    killed_by = {"check": "forward", "case_id": _case_id(3, "float32"), "repro": "python -m harness verify --case ..."}
    mutants = [
        {"op": "rmsnorm", "name": "divide_by_block", "origin": "catalog", "operator": None, "location": "kernels/rmsnorm.py:40",
         "diff": "-    mean = tl.sum(x * x) / N\n+    mean = tl.sum(x * x) / BLOCK", "status": "killed", "detected": True,
         "killed_by": killed_by, "seconds": 2.0, "note": "", "description": "BLOCK as divisor"},
        {"op": "rmsnorm", "name": "gen_mask_lt_le_1", "origin": "generated", "operator": "mask_lt_le", "location": "kernels/rmsnorm.py:33",
         "diff": "--- a\n+++ b\n@@ -33 +33 @@\n-    mask = cols < N\n+    mask = cols <= N", "status": "survived", "detected": False,
         "killed_by": None, "seconds": 5.0, "note": "", "description": "< to <= in a mask"},
        {"op": "rmsnorm", "name": "gen_sum_max_2", "origin": "generated", "operator": "sum_to_max", "location": "kernels/rmsnorm.py:41",
         "diff": "-a\n+b", "status": "timeout", "detected": True,
         "killed_by": {"check": "timeout", "case_id": "(between cases)", "repro": ""}, "seconds": 60.0, "note": "", "description": ""},
        {"op": "rmsnorm", "name": "gen_const_3", "origin": "generated", "operator": "constant", "location": "kernels/rmsnorm.py:50",
         "diff": "-1e-6\n+2e-6", "status": "equivalent", "detected": False, "killed_by": None, "seconds": 1.0,
         "note": "eps is an argument; the constant is a default never used", "description": ""},
    ]
    return {
        **HEADER, "command": "python -m harness mutate --backend interpreter",
        "score": 2 / 3, "min_score": 1.0, "passed": False, "refused": None, "total": 4, "detected": 2,
        "counts": {"survived": 1, "timeout": 1, "crashed": 0, "killed": 1, "incompetent": 0, "equivalent": 1},
        "seconds": 68.0, "mutants": mutants,
        "kill_matrix": {"divide_by_block": {"forward": killed_by["case_id"]}, "gen_sum_max_2": {"timeout": "(between cases)"}},
        "minimal_cases": [{"case_id": killed_by["case_id"], "kills": ["divide_by_block"], "repro": killed_by["repro"]}],
    }
