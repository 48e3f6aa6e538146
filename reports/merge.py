"""Join the reports of a run split over CI jobs (``verify --shard I/K``, ``mutate --shard I/K``).

Each part holds a disjoint slice of the cases (verify) or mutants (mutate); the merge puts the
records back together and recomputes every summary, verdict and score from them, so the result
is the report of the unsharded run. Parts must be the same run (backend, seed, examples) and
all K of them must be there: a missing part would silently shrink the suite.
Reads JSON only (no torch, triton or harness engine); the names and the score are the shared
``vocabulary``'s.
"""

from __future__ import annotations

from collections import Counter

from reports import drift, library_tests, mutation_report, verify_report
from vocabulary import JobStatus, mutation_score
from vocabulary.records import MutantRecord, kernel_summaries

__all__ = ["MergeError", "merge_verify", "merge_mutation"]

SAME_RUN = ("backend", "seed", "max_examples")


class MergeError(ValueError):
    """Parts that do not make up one run; the message says which and why."""


def _check_parts(kind: str, parts: list[tuple[str, dict]]) -> None:
    shards = []
    for where, report in parts:
        shard = report.get("shard")
        if not isinstance(shard, dict):
            raise MergeError(f"{where}/{kind} is not part of a sharded run (no 'shard' field): run it with --shard I/K")
        shards.append((shard.get("index"), shard.get("count"), where))
    counts = {count for _, count, _ in shards}
    if len(counts) != 1:
        raise MergeError(f"the {kind} parts were split differently: " + ", ".join(f"{w}: {i}/{k}" for i, k, w in shards))
    count = counts.pop()
    seen = Counter(index for index, _, _ in shards)
    missing = sorted(set(range(count)) - set(seen))
    twice = sorted(i for i, n in seen.items() if n > 1)
    if missing or twice:
        raise MergeError(f"{kind}: a merge needs each of the {count} parts once; "
                         + (f"missing part(s) {', '.join(f'{i}/{count}' for i in missing)}" if missing else "")
                         + ("; " if missing and twice else "")
                         + (f"part(s) given twice: {', '.join(f'{i}/{count}' for i in twice)}" if twice else ""))
    first_where, first = parts[0]
    for where, report in parts[1:]:
        for key in SAME_RUN:
            if key in first and report.get(key) != first.get(key):
                raise MergeError(f"{kind} parts are not one run: {key} is {first.get(key)!r} in {first_where} "
                                 f"but {report.get(key)!r} in {where}")


def _header(parts: list[tuple[str, dict]], drop: tuple[str, ...]) -> dict:
    first = parts[0][1]
    header = {k: v for k, v in first.items() if k not in drop and k != "shard"}
    header["merged_from"] = [{"dir": where, "shard": f"{r['shard']['index']}/{r['shard']['count']}"} for where, r in parts]
    header["seconds"] = max((r.get("seconds") or 0.0) for _, r in parts)  # the parts ran side by side
    if any(r.get("interrupted") for _, r in parts):
        header["interrupted"] = True
    return header


def merge_verify(parts: list[tuple[str, dict]]) -> dict:
    """verify.json of every part -> the verify.json of the whole run."""
    _check_parts("verify.json", parts)
    kernels: dict[tuple[str, str], list[dict]] = {}
    for _, report in parts:
        for k in kernel_summaries(report):
            kernels.setdefault((k["op"], k["name"]), []).append(k)
    records = [r for _, report in parts for r in report.get("cases", [])]
    by_kernel: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        by_kernel.setdefault((r["op"], r["kernel"]), []).append(r)
    summaries = []
    for (op, name), pieces in kernels.items():
        first = pieces[0]
        status = next((p["status"] for p in pieces if p.get("status", JobStatus.OK) != JobStatus.OK), JobStatus.OK.value)
        extra = {key: first[key] for key in ("origin", "contract", "plugin") if key in first}
        summaries.append(verify_report.kernel_summary(
            op, name, by_kernel.get((op, name), []), status=status, waivers=first.get("waivers") or {},
            forward_only=bool(first.get("forward_only")),
            seconds=max(p.get("seconds") or 0.0 for p in pieces),
            worker_seconds=round(sum(p.get("worker_seconds", p.get("seconds")) or 0.0 for p in pieces), 3),
            shards=sum(p.get("shards", 1) for p in pieces), **extra,
        ))
    header = _header(parts, drop=("passed", "kernels", "cases", "baseline"))
    if parts[0][1].get("baseline"):  # each part summed up its own cases' drift: sum up the whole run's
        plan = parts[0][1]["baseline"]
        header["baseline"] = drift.summarize(plan, [{"op": op, "name": name} for op, name in kernels], records)
        failed = [reason for _, r in parts for reason in (r.get("baseline") or {}).get("failed", [])]
        if failed:
            header["baseline"]["failed"] = failed
    return verify_report.build(header, summaries, records)


def merge_mutation(parts: list[tuple[str, dict]]) -> dict:
    """mutation.json of every part -> the mutation.json of the whole campaign (every part ran the sanity step)."""
    _check_parts("mutation.json", parts)
    mutants = [m for _, report in parts for m in report.get("mutants", [])]
    names = Counter(m["name"] for m in mutants)
    if any(n > 1 for n in names.values()):
        raise MergeError("mutation.json parts overlap: " + ", ".join(sorted(n for n, c in names.items() if c > 1)))
    mutants.sort(key=lambda m: (m["op"], m["name"]))
    refused = [f"{where}: {r['refused']}" for where, r in parts if r.get("refused")]
    sanity = {"passed": all((r.get("sanity") or {}).get("passed") for _, r in parts),
              "reason": "; ".join(f"{where}: {(r.get('sanity') or {}).get('reason')}" for where, r in parts),
              "runs": [run for _, r in parts for run in (r.get("sanity") or {}).get("runs", [])]}
    header = _header(parts, drop=("score", "min_score", "passed", "refused", "total", "detected", "counts", "origins",
                                  "seconds", "sanity", "mutants", "kill_matrix", "minimal_cases", "tests", "by_module"))
    for key in ("not_observable_here",):
        header[key] = list({m["name"]: m for _, r in parts for m in r.get(key, [])}.values())
    header["stale_equivalent_marks"] = sorted({n for _, r in parts for n in r.get("stale_equivalent_marks", [])})
    # distinct keys do not add up over parts (their mutants share the clean kernels' keys): each part's own
    header["specializations"] = {"parts": [r.get("specializations") for _, r in parts]}
    records = [MutantRecord.from_json(m) for m in mutants]
    score = mutation_score(r.status for r in records) if not refused else None
    return mutation_report.build(
        header, mutants=mutants, score=score, min_score=parts[0][1].get("min_score", 1.0), sanity=sanity,
        kill_matrix={r.name: {r.killed_by["check"]: r.killed_by["case_id"]} for r in records if r.detected and r.killed_by},
        minimal_cases=mutation_report.minimal_cases(mutants), seconds=header.pop("seconds"), refused="; ".join(refused) or None,
        tests=library_tests.merge([r.get("tests") for _, r in parts]),
    )
