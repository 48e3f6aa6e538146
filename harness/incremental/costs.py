"""Longest first: the order of verify's jobs, from what each kernel's verify cost last time.

A pool that starts the longest job last ends with one worker busy and the others idle (on two
cores the cold gate's verify lost 90 s of its 524 that way, softmax started tenth of eleven).
The expected cost of a kernel is its worker-seconds in the report folder's last ``verify.json``
of the same backend or, on a fresh clone, in the committed ``properties/verify_costs.json``
(written from a full verify: ``python -m harness.incremental.costs reports/out/verify.json >
properties/verify_costs.json``). A kernel with no figure (a new plugin kernel) goes first: it
may be long, and it is the one its author waits for. Costs only order jobs; a stale figure
costs time, never a verdict.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from harness.settings import PROJECT_ROOT

COMMITTED = PROJECT_ROOT / "properties" / "verify_costs.json"
FORMAT = 1


def from_report(report: dict) -> dict[str, float]:
    """``op/name`` -> worker-seconds of each kernel that ran in ``report`` (a verify.json); reused
    verdicts carry their saved run's figure."""
    costs = {}
    for kernel in report.get("kernels", []):
        seconds = kernel.get("worker_seconds", kernel.get("seconds"))
        if isinstance(seconds, (int, float)) and seconds > 0 and "op" in kernel and "name" in kernel:
            costs[f"{kernel['op']}/{kernel['name']}"] = float(seconds)
    return costs


def expected(report_dir: str | Path, backend: str) -> dict[str, float]:
    """The committed figures of ``backend``, overridden by the folder's last verify.json of it."""
    costs: dict[str, float] = {}
    committed = _read(COMMITTED)
    if committed and committed.get("format") == FORMAT:
        costs.update({k: float(v) for k, v in committed.get("backends", {}).get(backend, {}).items()
                      if isinstance(v, (int, float))})
    last = _read(Path(report_dir) / "verify.json")
    if last and last.get("backend") == backend:
        costs.update(from_report(last))
    return costs


def longest_first(entries: list, costs: dict[str, float]) -> list:
    """``entries`` (KernelEntry) by expected cost, longest first, unknown ones before all; ties
    keep their order."""
    return sorted(entries, key=lambda e: -costs.get(f"{e.op}/{e.name}", math.inf))


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def main(argv: list[str]) -> int:
    """Print the committed file's content from one or more verify.json files (one per backend)."""
    backends: dict[str, dict[str, float]] = {}
    for path in argv:
        report = _read(Path(path))
        if report is None or "backend" not in report:
            print(f"costs: {path} is not a verify.json", file=sys.stderr)
            return 2
        backends.setdefault(report["backend"], {}).update({k: round(v, 1) for k, v in from_report(report).items()})
    print(json.dumps({"format": FORMAT, "backends": backends}, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
