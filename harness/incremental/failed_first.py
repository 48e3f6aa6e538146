"""``verify --failed-first``: the last run's failing cases first.

Reads the report folder's last ``verify.json`` before the run: the kernels that failed there start
first, and each starts its floor with the cases that failed (harness.run.suite's ``floor_first``).
Only the order changes: the same cases run and the verdict is the same. A failed generated case is
drawn again in its place in the hypothesis sequence (the same seed draws the same cases).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["last_failures", "kernels_first"]


def last_failures(report_dir: str | Path) -> dict[str, tuple[str, ...]]:
    """``op/kernel`` -> the ids of its failed cases in the folder's last verify.json, in the order
    they failed (empty when there is no readable report)."""
    try:
        report = json.loads((Path(report_dir) / "verify.json").read_text())
    except (OSError, ValueError):
        return {}
    failed: dict[str, dict[str, None]] = {}
    for record in report.get("cases", []) if isinstance(report, dict) else []:
        if isinstance(record, dict) and record.get("passed") is False and not record.get("waived"):
            key = f"{record.get('op')}/{record.get('kernel')}"
            failed.setdefault(key, {})[str(record.get("case_id"))] = None
    return {key: tuple(ids) for key, ids in failed.items()}


def kernels_first(entries: list, failures: dict[str, tuple[str, ...]]) -> list:
    """``entries`` (KernelEntry) with the kernels that failed last time first; ties keep their order."""
    return sorted(entries, key=lambda e: f"{e.op}/{e.name}" not in failures)
