"""The Triton specializations each kernel's verify suite launches (what a GPU compiles cold),
from a verify.json, against the committed baseline (bench/specializations_baseline.json); and,
where the report folder holds a mutation.json, the campaign's per mutated kernel, with mutant
schemata (``specializations.per_kernel``) and with each mutant built alone
(``specializations.without_schemata``), against the baseline's ``campaign``.

    .venv/bin/python scripts/specializations.py [REPORT_DIR]           # the tables, with the change
    .venv/bin/python scripts/specializations.py REPORT_DIR --write     # make them the baseline

The baseline holds the counts before the kernels' runtime sizes (``before``) and the current
ones (``after``, what a run is compared with); --write replaces ``after`` only, and the
``campaign`` entries of the kernels the mutation.json names (a campaign of some ops keeps the
others' entries).

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
    mutation = Path(args.report_dir) / "mutation.json"
    if not path.is_file() and not mutation.is_file():
        print(f"specializations: no verify.json or mutation.json in {args.report_dir}", file=sys.stderr)
        return 2
    base = json.loads(BASELINE.read_text()) if BASELINE.is_file() else {}
    campaign = campaign_counts(json.loads(mutation.read_text())) if mutation.is_file() else None
    if args.write:
        if path.is_file():
            report = json.loads(path.read_text())
            now = counts(report)
            base["before"] = base.get("before", {"kernels": {}})
            base["after"] = {"backend": report.get("backend"), "created": report.get("created"), "kernels": now}
            print(f"specializations: verify's baseline ({sum(now.values())} over {len(now)} kernels)")
        if campaign is not None:
            kept = base.get("campaign", {}).get("kernels", {})
            base["campaign"] = {"backend": campaign["backend"], "created": campaign["created"],
                                "kernels": {**kept, **campaign["kernels"]}}
            print(f"specializations: the campaign's baseline ({len(campaign['kernels'])} kernels)")
        BASELINE.write_text(json.dumps(base, indent=1, sort_keys=True) + "\n")
        print(f"specializations: baseline written: {BASELINE}")
        return 0
    if path.is_file():
        verify_table(json.loads(path.read_text()), base)
    if campaign is not None:
        campaign_table(campaign, base.get("campaign", {}))
    return 0


def campaign_counts(report: dict) -> dict:
    """Per mutated kernel: the campaign's compiles with schemata and with each mutant built alone."""
    spec = report.get("specializations") or {}
    alone = (spec.get("without_schemata") or {}).get("per_kernel", {})
    return {"backend": report.get("backend"), "created": report.get("created"),
            "kernels": {k: {"schemata": n, "alone": alone.get(k, n)} for k, n in (spec.get("per_kernel") or {}).items()}}


def campaign_table(now: dict, base: dict) -> None:
    print(f"\n{'campaign: mutated kernel':44} {'now':>6} {'alone':>6} {'change':>7} {'baseline':>9}   "
          f"(backend {now['backend']}; baseline {base.get('backend')}, {base.get('created')})")
    known = base.get("kernels", {})
    for name, n in sorted(now["kernels"].items()):
        change = f"{(n['schemata'] - n['alone']) / n['alone']:+.0%}" if n["alone"] else "-"
        b = known.get(name, {}).get("schemata")
        print(f"{name:44} {n['schemata']:>6} {n['alone']:>6} {change:>7} {b if b is not None else '-':>9}")
    print(f"{'total (sum over kernels)':44} {sum(n['schemata'] for n in now['kernels'].values()):>6} "
          f"{sum(n['alone'] for n in now['kernels'].values()):>6}")


def verify_table(report: dict, base: dict) -> None:
    now = counts(report)
    before = base.get("before", base if "kernels" in base else {"kernels": {}})
    after = base.get("after", before)
    print(f"{'kernel':44} {'now':>6} {'baseline':>9} {'change':>8} {'before':>7}   (backend {report.get('backend')}; "
          f"baseline {after.get('backend')}, {after.get('created')}; before {before.get('created')})")
    for name in sorted(set(now) | set(after["kernels"])):
        a, b, c = now.get(name), after["kernels"].get(name), before["kernels"].get(name)
        change = "-" if a is None or not b else f"{(a - b) / b:+.0%}"
        print(f"{name:44} {a if a is not None else '-':>6} {b if b is not None else '-':>9} {change:>8} "
              f"{c if c is not None else '-':>7}")
    print(f"{'total':44} {sum(now.values()):>6} {sum(after['kernels'].values()):>9} {'':>8} "
          f"{sum(before['kernels'].values()):>7}")


if __name__ == "__main__":
    sys.exit(main())
