"""The Triton specializations each kernel's verify suite launches (what a GPU compiles cold),
from a verify.json, against the committed baseline (bench/specializations_baseline.json).

    .venv/bin/python scripts/specializations.py [REPORT_DIR]           # the table, with the change
    .venv/bin/python scripts/specializations.py REPORT_DIR --write     # make it the baseline

The baseline holds the counts before the kernels' runtime sizes (``before``) and the current
ones (``after``, what a run is compared with); --write replaces ``after`` only.

The counts come from Triton's own specialization key of each launch (harness.run.specializations),
measured on whichever backend ran verify: on the interpreter they are the GPU gate's compile count
for the launch parameters the kernels choose there. Standard library only."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

BASELINE = Path(__file__).resolve().parents[1] / "bench" / "specializations_baseline.json"


def counts(report: dict) -> dict[str, int]:
    return {f"{k['op']}/{k['name']}": int(k.get("specializations") or 0) for k in report.get("kernels", [])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report_dir", nargs="?", default="reports/out")
    p.add_argument("--write", action="store_true", help="write these counts as the baseline")
    args = p.parse_args(argv)
    path = Path(args.report_dir) / "verify.json"
    if not path.is_file():
        print(f"specializations: no verify.json in {args.report_dir}", file=sys.stderr)
        return 2
    report = json.loads(path.read_text())
    now = counts(report)
    base = json.loads(BASELINE.read_text()) if BASELINE.is_file() else {}
    before = base.get("before", base if "kernels" in base else {"kernels": {}})
    after = base.get("after", before)
    if args.write:
        BASELINE.write_text(json.dumps({"before": before, "after": {"backend": report.get("backend"), "created":
                                        report.get("created"), "kernels": now}}, indent=1, sort_keys=True) + "\n")
        print(f"specializations: baseline written ({sum(now.values())} over {len(now)} kernels): {BASELINE}")
        return 0
    print(f"{'kernel':44} {'now':>6} {'baseline':>9} {'change':>8} {'before':>7}   (backend {report.get('backend')}; "
          f"baseline {after.get('backend')}, {after.get('created')}; before {before.get('created')})")
    for name in sorted(set(now) | set(after["kernels"])):
        a, b, c = now.get(name), after["kernels"].get(name), before["kernels"].get(name)
        change = "-" if a is None or not b else f"{(a - b) / b:+.0%}"
        print(f"{name:44} {a if a is not None else '-':>6} {b if b is not None else '-':>9} {change:>8} "
              f"{c if c is not None else '-':>7}")
    print(f"{'total':44} {sum(now.values()):>6} {sum(after['kernels'].values()):>9} {'':>8} "
          f"{sum(before['kernels'].values()):>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
