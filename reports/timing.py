"""Where the gate's time went: one row per step, from the JSON reports only.

verify: its wall time, and the phases its workers spent summed over them (Triton compilation,
kernel calls, oracle, checks); train-check: its wall time; mutation: its wall time, the slowest
clean run of the sanity step and the memcheck second look. Rendered by summary.md and
index.html; a field an older report lacks is left out, never guessed.
"""

from __future__ import annotations

from vocabulary.records import kernel_summaries

__all__ = ["rows"]

PHASES = (("compile_s", "Triton compilation"), ("kernel_s", "kernel calls"), ("oracle_s", "oracle"), ("checks_s", "checks"),
          ("other_s", "start-up and case generation"))


def _verify_detail(verify: dict) -> str:
    totals = {key: 0.0 for key, _ in PHASES}
    seen = False
    for k in kernel_summaries(verify):
        for key, _ in PHASES:
            value = (k.get("time_breakdown") or {}).get(key)
            if value is not None:
                totals[key] += value
                seen = True
    if not seen:
        return ""
    return ", ".join(f"{label} {totals[key]:.1f} s" for key, label in PHASES) + " (summed over workers)"


def _mutation_detail(mutation: dict) -> str:
    parts = []
    clean = (mutation.get("sanity") or {}).get("clean_seconds") or {}
    if clean:
        parts.append(f"sanity (slowest clean run) {max(clean.values()):.1f} s")
    first = mutation.get("memcheck_first") or {}
    if first.get("seconds") is not None:
        parts.append(f"memcheck first look {first['seconds']:.1f} s beside the pool "
                     f"({first.get('killed', 0)} of {first.get('looked', 0)} killed)")
    memcheck = mutation.get("memcheck") or {}
    if memcheck.get("seconds") is not None:
        parts.append(f"memcheck second look {memcheck['seconds']:.1f} s ({memcheck.get('checked', 0)} survivors)")
    workers = mutation.get("workers") or {}
    if workers.get("count"):
        per_gpu = workers.get("mutants_per_gpu")
        spread = f", mutants per GPU {', '.join(f'{g}: {n}' for g, n in per_gpu.items())}" if per_gpu else ""
        parts.append(f"{workers['count']} workers{spread}")
    return "; ".join(parts)


def rows(verify: dict | None, mutation: dict | None, extras: dict[str, dict] | None = None) -> list[dict]:
    """[{step, seconds (wall, or None), detail}] for the steps that have a report."""
    out = []
    if verify is not None:
        out.append({"step": "verify", "seconds": verify.get("seconds"), "detail": _verify_detail(verify)})
    for name, data in sorted((extras or {}).items()):
        if data.get("seconds") is not None:
            out.append({"step": name, "seconds": data["seconds"], "detail": ""})
    if mutation is not None:
        out.append({"step": "mutation", "seconds": mutation.get("seconds"), "detail": _mutation_detail(mutation)})
    return out
