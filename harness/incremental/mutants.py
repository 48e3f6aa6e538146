"""Mutant outcomes reused from the incremental store, and the new ones saved to it."""

from __future__ import annotations

import collections

from harness.incremental import plan as incremental
from harness.incremental.store import Store


def saved_outcomes(plans: dict, entries) -> dict:
    """The Outcome of each mutant whose key the store holds, marked with the date it was saved."""
    from harness.mutation.outcome import Outcome, Status

    found = {}
    for e in entries:
        p = plans.get(e.name)
        if p is None or not p.reused:
            continue
        o = p.saved["payload"]
        found[e.name] = Outcome(e, Status(o["status"]), o.get("killed_by"), o.get("seconds", 0.0), o.get("note", ""),
                                o.get("gpu"), reused_from=p.saved["saved_at"])
    return found


def summary_line(plans: dict) -> str:
    reused = sum(p.reused for p in plans.values())
    reasons = collections.Counter(p.reason for p in plans.values() if not p.reused)
    why = "; ".join(f"{n} x {r}" for r, n in reasons.most_common(3))
    return f"mutate: {reused} mutant outcome(s) reused, {len(plans) - reused} rerun" + (f" ({why})" if why else "")


def save(store: Store, plans: dict, outcomes, *, partial: bool = False) -> None:
    """Keep each outcome computed now whose status does not depend on the machine's load (a
    timeout or a crash is run again). ``partial``: the campaign was interrupted after its sanity
    step passed; its kills and incompetent mutants are final and kept (the next run resumes from
    them), its survivors are not, since their second looks (memcheck, the floor) never ran."""
    from harness.mutation.outcome import Status

    kept = (Status.KILLED, Status.INCOMPETENT) if partial else (Status.KILLED, Status.SURVIVED, Status.INCOMPETENT)
    with store.batch():
        for o in outcomes:
            p = plans.get(o.entry.name)
            if p is None or p.reused or o.reused_from or o.status not in kept:
                continue
            payload = {k: v for k, v in o.to_dict().items() if k in ("status", "killed_by", "seconds", "note", "gpu")}
            incremental.remember(store, incremental.MUTANT, f"{o.entry.op}/{o.entry.name}", p, payload)


def saved_sanity(plan_):
    """The reused Sanity of a passed sanity step, or None (only a passed one is ever saved)."""
    from harness.mutation.campaign import Sanity

    if not plan_.reused:
        return None
    s = plan_.saved["payload"]
    return Sanity(True, s["reason"], dict(s["clean_seconds"]), list(s["details"]))


def save_sanity(store: Store, plan_, check) -> None:
    payload = {"reason": check.reason, "clean_seconds": check.clean_seconds, "details": check.details}
    incremental.remember(store, incremental.SANITY, plan_.parts["kernel"]["ops"] and ",".join(plan_.parts["kernel"]["ops"]),
                         plan_, payload)
