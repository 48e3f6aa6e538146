"""How long a campaign will take, said before it starts: from the mutant count and what one
case of the op costs here (the report folder's last verify of the op's kernels, or the committed
figures: harness.incremental.costs).

A killed mutant stops at its first failed case (a couple of cases, the kill cache puts the case
that killed it last time first); a surviving one runs the op's whole suite, as verify does. So
the estimate is a range: every mutant killed at once, every mutant surviving. A figure only
informs the user; it decides nothing.
"""

from __future__ import annotations

import statistics

from harness.incremental import costs

__all__ = ["estimate", "describe"]

CASES_TO_A_KILL = 2  # cases a killed mutant typically runs before its first failure (floor_first: fewer)


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def estimate(mutants: list, sanity_ops: list[str], *, parallel: int, report_dir, backend: str,
             cases_of, one_case: bool = False) -> dict | None:
    """``mutants``: the entries to run (each with ``op``); ``cases_of(op)``: the cases of its suite
    (floor and generated); ``one_case``: a ``--case`` campaign (every job runs that one case).
    {low_s, high_s, per_case_s: {op: s}, suite_s, unknown: [ops], ...}, wall seconds over
    ``parallel`` workers; None when nothing runs."""
    if not mutants and not sanity_ops:
        return None
    figures = costs.expected(report_dir, backend)
    suite_s, per_case_s, unknown = {}, {}, []
    for op in sorted({m.op for m in mutants} | set(sanity_ops)):
        of_op = [seconds for key, seconds in figures.items() if key.partition("/")[0] == op]
        if not of_op:
            unknown.append(op)
            continue
        suite_s[op] = statistics.median(of_op)
        per_case_s[op] = suite_s[op] / max(1, cases_of(op))
        if one_case:
            suite_s[op] = per_case_s[op]
    known = [m for m in mutants if m.op in suite_s]
    sanity = sum(suite_s.get(op, 0.0) for op in sanity_ops)
    low = sanity + sum(min(suite_s[m.op], CASES_TO_A_KILL * per_case_s[m.op]) for m in known)
    high = sanity + sum(suite_s[m.op] for m in known)
    workers = max(1, parallel)
    return {"low_s": low / workers, "high_s": high / workers, "per_case_s": per_case_s, "suite_s": suite_s,
            "unknown": unknown, "mutants": len(mutants), "workers": workers}


def describe(figure: dict | None) -> str:
    """One line for the console, before the campaign starts."""
    if figure is None:
        return "mutate: nothing to run"
    line = (f"mutate: {figure['mutants']} mutant(s) over {figure['workers']} worker(s); expected "
            f"{_minutes(figure['low_s'])} (every mutant killed at its first cases) to {_minutes(figure['high_s'])} "
            f"(every mutant running its whole suite)")
    if figure["suite_s"]:
        line += "; " + ", ".join(f"{op}: {figure['per_case_s'][op]:.2f} s a case, {_minutes(s)} a suite"
                                 for op, s in figure["suite_s"].items())
    if figure["unknown"]:
        line += (f"; no cost figure for {', '.join(figure['unknown'])} (not counted): "
                 "a verify of its kernels in this report folder gives one")
    return line
