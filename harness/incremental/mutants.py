"""Mutant outcomes reused from the incremental store, and the new ones saved to it."""

from __future__ import annotations

import collections
import dataclasses

from harness.incremental import plan as incremental
from harness.incremental.store import Store


def saved_outcomes(plans: dict, entries) -> dict:
    """The Outcome of each mutant whose key the store holds, marked with the date it was saved."""
    from harness.mutation.outcome import Outcome, Status, ident

    found = {}
    for e in entries:
        p = plans.get(ident(e))
        if p is None or not p.reused:
            continue
        o = p.saved["payload"]
        found[ident(e)] = Outcome(e, Status(o["status"]), o.get("killed_by"), o.get("seconds", 0.0), o.get("note", ""),
                                o.get("gpu"), reused_from=p.saved["saved_at"],
                                specializations=tuple(o.get("specialization_keys") or ()))
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
    from harness.mutation.outcome import Status, ident

    kept = (Status.KILLED, Status.INCOMPETENT) if partial else (Status.KILLED, Status.SURVIVED, Status.INCOMPETENT)
    with store.batch():
        for o in outcomes:
            p = plans.get(ident(o.entry))
            if p is None or p.reused or o.reused_from or o.status not in kept:
                continue
            payload = {k: v for k, v in o.to_dict().items() if k in ("status", "killed_by", "seconds", "note", "gpu")}
            payload["specialization_keys"] = list(o.specializations)
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


@dataclasses.dataclass
class Reuse:
    """What one campaign reuses from the store and saves back: outcomes and the sanity step
    (nothing for a library campaign, whose outcomes depend on code the store does not key)."""

    store: Store | None = None
    plans: dict = dataclasses.field(default_factory=dict)
    saved: dict = dataclasses.field(default_factory=dict)
    sanity_plan: object = None
    saved_sanity: object = None  # harness.mutation.campaign.Sanity, reused
    verified: dict = dataclasses.field(default_factory=dict)  # clean kernel -> incremental.verified_cases(...)

    @classmethod
    def open(cls, report_dir, backend: str, entries, ops: list[str], *, fresh: bool, settings: dict,
             timeout: float | None) -> Reuse:
        """The store of ``report_dir`` (``fresh``: reuse nothing, mutate --no-cache), the plans of
        ``entries`` and of the sanity step of ``ops`` under these settings (a mutant's also under
        its ``timeout``), and what they reuse."""
        from harness.mutation.campaign import clean_kernels

        store = Store(report_dir, reuse=not fresh)
        plans = incremental.mutant_plans(entries, store, backend=backend, settings={**settings, "timeout": timeout})
        sanity_plan = incremental.sanity_plan(ops, store, backend=backend, settings=settings)
        verified = {}
        for e in clean_kernels(ops, False):
            found = incremental.verified_cases(e, store, backend=backend)
            if found is not None:
                verified[e.name] = found
        return cls(store, plans, saved_outcomes(plans, entries), sanity_plan, saved_sanity(sanity_plan), verified)

    def sanity_record(self, check) -> dict:
        """mutation.json's ``sanity`` for the verdict ``check``; a passed one not reused is saved
        (passed: every sanity job ended, even in an interrupted campaign)."""
        sanity = {"passed": check.passed, "reason": check.reason, "clean_seconds": check.clean_seconds,
                  "timeouts": check.timeouts, "runs": check.details}
        if self.saved_sanity is not None:
            sanity["reused_from"] = self.sanity_plan.saved["saved_at"]
        elif check.passed and self.store is not None:
            save_sanity(self.store, self.sanity_plan, check)
        return sanity

    def save(self, outcomes, *, partial: bool = False) -> None:
        if self.store is not None:
            save(self.store, self.plans, outcomes, partial=partial)
