"""Drift against a base revision (``verify --baseline REV``), read from the records alone.

A record of a value check carries ``baseline: {identical, max_ulps, share_base, share_head}``
(harness.baseline.pairing). Per kernel: the cases compared, how many are bitwise identical
in every output and how many changed, the largest difference in ulps, the worst error share
(err_ratio) of base and head, and the cases whose share grew most. Limits (``--max-drift-ulps``,
``--require-bitwise``) turn drift into a failure with a readable reason.
"""

from __future__ import annotations

import math

__all__ = ["summarize", "limit_failures", "markdown_lines", "console_lines", "figure"]

GREW_SHOWN = 5


def _max(values):
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return max(values) if values else None


def _cases(records: list[dict]) -> dict[str, list[dict]]:
    cases: dict[str, list[dict]] = {}
    for r in records:
        if r.get("baseline"):
            cases.setdefault(r["case_id"], []).append(r)
    return cases


def _kernel(op: str, name: str, records: list[dict]) -> dict:
    cases = _cases(records)
    identical = sum(1 for recs in cases.values() if all(r["baseline"].get("identical") for r in recs))
    per_case = []
    for case_id, recs in cases.items():
        base, head = _max(r["baseline"].get("share_base") for r in recs), _max(r["baseline"].get("share_head") for r in recs)
        per_case.append({"case_id": case_id, "max_ulps": _max(r["baseline"].get("max_ulps") for r in recs),
                         "share_base": base, "share_head": head,
                         "identical": all(r["baseline"].get("identical") for r in recs),
                         "errors": sorted({r["baseline"]["error"] for r in recs if r["baseline"].get("error")})})
    grew = sorted((c for c in per_case if c["share_base"] is not None and c["share_head"] is not None
                   and c["share_head"] > c["share_base"]), key=lambda c: c["share_head"] - c["share_base"], reverse=True)
    return {
        "op": op, "name": name, "cases": len(cases), "identical": identical, "changed": len(cases) - identical,
        "max_ulps": _max(c["max_ulps"] for c in per_case),
        "worst_share_base": _max(c["share_base"] for c in per_case),
        "worst_share_head": _max(c["share_head"] for c in per_case),
        "changed_cases": [{"case_id": c["case_id"], "max_ulps": c["max_ulps"]} for c in per_case if not c["identical"]],
        "grew_most": grew[:GREW_SHOWN],
        "errors": sorted({e for c in per_case for e in c["errors"]}),
    }


def summarize(plan: dict, kernels: list[dict], records: list[dict]) -> dict:
    """verify.json's ``baseline``: ``plan`` from harness.baseline.session (rev, commit, added,
    removed, renamed), ``kernels`` the run's kernel list (op, name)."""
    paired = {(k["op"], k["name"]) for k in kernels} - {(a["op"], a["name"]) for a in plan.get("added", [])}
    return {
        "rev": plan["rev"], "commit": plan.get("commit"), "repositories": plan.get("repositories", []),
        "kernels": [_kernel(op, name, [r for r in records if r["op"] == op and r["kernel"] == name])
                    for op, name in sorted(paired)],
        "added": plan.get("added", []), "removed": plan.get("removed", []), "renamed": plan.get("renamed", []),
    }


def limit_failures(baseline: dict, *, max_ulps: int | None, bitwise: bool) -> list[str]:
    """Why the drift breaks the limits the user asked for (empty: within them)."""
    reasons = []
    for k in baseline["kernels"]:
        who = f"{k['op']}/{k['name']}"
        if bitwise and k["changed"]:
            reasons.append(f"{who}: {k['changed']} of {k['cases']} case(s) differ bitwise from {baseline['rev']} "
                           f"(up to {k['max_ulps']} ulps), e.g. {k['changed_cases'][0]['case_id']}; --require-bitwise")
        elif max_ulps is not None and k["max_ulps"] is not None and k["max_ulps"] > max_ulps:
            reasons.append(f"{who}: up to {k['max_ulps']} ulps from {baseline['rev']}, more than --max-drift-ulps {max_ulps}")
        if (bitwise or max_ulps is not None) and k["errors"]:
            reasons.append(f"{who}: not compared with {baseline['rev']} on some cases: {k['errors'][0]}")
    return reasons


def _share(v) -> str:
    return "-" if v is None else f"{v:.3g}"


def markdown_lines(baseline: dict | None) -> list[str]:
    """A short table for a pull-request comment."""
    if not baseline:
        return []
    lines = ["", f"### Drift against `{baseline['rev']}`", "",
             "| kernel | cases | identical | changed | max ulps | worst share base -> head |", "|---|---:|---:|---:|---:|---|"]
    for k in baseline["kernels"]:
        lines.append(f"| {k['op']}/{k['name']} | {k['cases']} | {k['identical']} | {k['changed']} | "
                     f"{'-' if k['max_ulps'] is None else k['max_ulps']} | {_share(k['worst_share_base'])} -> "
                     f"{_share(k['worst_share_head'])} |")
    for what in ("added", "removed"):
        if baseline.get(what):
            lines.append(f"\n{what}: " + ", ".join(f"{e['op']}/{e['name']}" for e in baseline[what]))
    if baseline.get("renamed"):
        lines.append("\nrenamed: " + ", ".join(f"{e['op']}/{e['from']} -> {e['to']}" for e in baseline["renamed"]))
    if baseline.get("failed"):
        lines += ["", "**Drift limit exceeded:** " + "; ".join(baseline["failed"])]
    return lines


def console_lines(baseline: dict) -> list[str]:
    """One line per kernel for the terminal, then the cases that changed (a few)."""
    lines = []
    for k in baseline["kernels"]:
        lines.append(f"drift vs {baseline['rev']}: {k['op']}/{k['name']}: {k['identical']} of {k['cases']} case(s) bitwise "
                     f"identical, {k['changed']} changed, max {'-' if k['max_ulps'] is None else k['max_ulps']} ulps, "
                     f"worst share {_share(k['worst_share_base'])} -> {_share(k['worst_share_head'])}")
        lines += [f"  changed: {c['case_id']} ({c['max_ulps']} ulps)" for c in k["changed_cases"][:GREW_SHOWN]]
        if len(k["changed_cases"]) > GREW_SHOWN:
            lines.append(f"  ... and {len(k['changed_cases']) - GREW_SHOWN} more (verify.json: baseline)")
        lines += [f"  not compared: {e}" for e in k["errors"][:2]]
    for what in ("added", "removed"):
        lines += [f"drift vs {baseline['rev']}: {what} {e['op']}/{e['name']}" for e in baseline.get(what, [])]
    lines += [f"drift vs {baseline['rev']}: renamed {e['op']}/{e['from']} -> {e['to']}" for e in baseline.get("renamed", [])]
    return lines


def figure(records: list[dict]) -> str | None:
    """Error share, base against head, one point per (case, output); base64 PNG or None."""
    from reports import plots

    plt = plots._pyplot()
    points = [(r["baseline"]["share_base"], r["baseline"]["share_head"], r["baseline"].get("identical"))
              for r in records if r.get("baseline") and r["baseline"].get("share_base") is not None
              and r["baseline"].get("share_head") is not None]
    if plt is None or not points:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for same, color, label in ((True, "#1f77b4", "bitwise identical"), (False, "#d62728", "changed")):
        xs = [p[0] for p in points if bool(p[2]) == same]
        ys = [p[1] for p in points if bool(p[2]) == same]
        if xs:
            ax.scatter(xs, ys, s=14, c=color, label=label, alpha=0.7)
    top = max(max(p[0] for p in points), max(p[1] for p in points), 1e-12) * 1.05
    ax.plot([0, top], [0, top], color="#999999", lw=1, ls="--")
    ax.set_xlabel("error share, base (err / allowed)")
    ax.set_ylabel("error share, head (err / allowed)")
    ax.set_title("Drift: error share per case")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return plots._png(fig, plt)
