"""The mutation report: ``mutation.json`` and its terminal table (survivors first, with diffs).

Reads the campaign's outcomes as plain dicts; knows nothing about how mutants ran.
"""

from __future__ import annotations

from collections import Counter

from rich.table import Table

from reports import library_tests
from reports.terminal import report_console
from vocabulary import STATUS_ORDER as _ORDER
from vocabulary import Status

STATUS_ORDER = tuple(s.value for s in _ORDER)  # what needs a look first; a record holds the value
STATUS_STYLE = {Status.SURVIVED: "red", Status.TIMEOUT: "yellow", Status.CRASHED: "yellow", Status.KILLED: "green",
                Status.INCOMPETENT: "dim", Status.EQUIVALENT: "cyan"}


def build(header: dict, *, mutants: list[dict], score: float | None, min_score: float, sanity: dict,
          kill_matrix: dict, minimal_cases: list[dict], seconds: float, refused: str | None = None,
          tests: dict | None = None) -> dict:
    """``tests``: a library campaign's tests command and its score (harness.mutation.library_tests);
    a library campaign also gets ``by_module``: per module, both scores and the 2x2."""
    counts = Counter(m["status"] for m in mutants)
    origins = Counter(m["origin"] for m in mutants)
    passed = refused is None and score is not None and score >= min_score
    library = "library" in header
    return {
        **header,
        "score": score,
        "min_score": min_score,
        "passed": passed,
        "refused": refused,
        "total": len(mutants),
        "detected": sum(m["detected"] for m in mutants),
        "counts": {s: counts.get(s, 0) for s in STATUS_ORDER},
        "origins": dict(sorted(origins.items())),
        "seconds": round(seconds, 1),
        "sanity": sanity,
        "mutants": mutants,
        "kill_matrix": kill_matrix,
        "minimal_cases": minimal_cases,
        "weak_kills": weak_kills(mutants),
        **({"tests": tests, "by_module": library_tests.by_module(mutants)} if library else {}),
    }


WEAK_MARGIN = 4.0  # a kill whose error ratio is under this is listed: a slightly wider tolerance would lose it


def weak_kills(mutants: list[dict]) -> list[dict]:
    """The kills by a value whose error ratio (``killed_by.margin``) is under WEAK_MARGIN, smallest first."""
    weak = [{"op": m["op"], "name": m["name"], "margin": m["killed_by"]["margin"], "check": m["killed_by"]["check"],
             "case_id": m["killed_by"]["case_id"]}
            for m in mutants if m.get("detected") and isinstance((m.get("killed_by") or {}).get("margin"), (int, float))
            and m["killed_by"]["margin"] < WEAK_MARGIN]
    return sorted(weak, key=lambda w: (w["margin"], w["op"], w["name"]))


def short_case(case_id: str) -> str:
    """``rmsnorm:M=17,N=257,dtype=float16,layout=transposed,...`` -> ``17x257 float16 transposed``."""
    params = dict(p.partition("=")[::2] for p in case_id.partition(":")[2].split(",") if "=" in p)
    if "M" in params and "N" in params:
        rest = [params[k] for k in ("dtype", "layout", "values") if k in params]
        return " ".join([f"{params['M']}x{params['N']}", *rest])
    return case_id


def ordered(mutants: list[dict]) -> list[dict]:
    """Survivors first, then the other outcomes; stable by op and name within each."""
    return sorted(mutants, key=lambda m: (STATUS_ORDER.index(m["status"]), m["op"], m["name"]))


COMPACT_STATUSES = (Status.SURVIVED.value, Status.TIMEOUT.value, Status.CRASHED.value)  # what a CI log lists; the rest is in the reports


def print_mutation(report: dict, *, path: str, file=None, full: bool = True) -> None:
    """``full=False`` (a CI log): the table lists only survivors, timeouts and crashes, and one line
    says where the others are (a campaign has thousands of killed mutants)."""
    console = report_console(file, min_width=160)
    if report["refused"] and not report.get("interrupted"):
        console.print(f"[red]mutation campaign refused to score[/]: {report['refused']}", highlight=False)
        console.print(f"report: {path}")
        return
    if report.get("interrupted"):
        console.print(f"[red]INTERRUPTED[/]: {report['refused']}; not run: {len(report.get('not_run', []))}", highlight=False)
    table = Table(title=f"mutate: {report['backend']} on {report['device']}  (seed {report['seed']})")
    for col in ("status", "op", "mutant", "origin", "operator", "location", "detected by", "s"):
        table.add_column(col, justify="right" if col == "s" else "left", overflow="fold", no_wrap=col in ("op", "mutant"))
    shown = [m for m in ordered(report["mutants"]) if full or m["status"] in COMPACT_STATUSES]
    for m in shown:
        k = m["killed_by"]
        by = f"{k['check']} @ {short_case(k['case_id'])}" if k else (m["note"][:60] if m["note"] else "-")
        style = STATUS_STYLE[Status(m["status"])]
        table.add_row(f"[{style}]{m['status']}[/]", m["op"], m["name"], m["origin"], m["operator"] or "-",
                      m["location"] or "-", by, f"{m['seconds']:.1f}")
    if shown or full:
        console.print(table)
    if len(shown) < len(report["mutants"]):
        console.print(f"{len(report['mutants']) - len(shown)} more mutant(s) (killed, incompetent, equivalent) are listed "
                      f"in {path} and index.html", highlight=False)

    for m in ordered(report["mutants"]):
        if m["status"] != Status.SURVIVED:
            continue
        console.print(f"[red]SURVIVED[/] {m['op']}/{m['name']} ({m['location']}): {m['description']}", highlight=False)
        for line in (m["diff"] or "(no diff: a plugin mutant)").splitlines():
            console.print(f"    {line}", highlight=False, markup=False)
    if report.get("stale_equivalent_marks"):
        console.print("[yellow]equivalence marks ignored (their mutant's source changed; judge again):[/] "
                      + ", ".join(report["stale_equivalent_marks"]), highlight=False)
    equivalent = [m for m in report["mutants"] if m["status"] == Status.EQUIVALENT]
    if equivalent:
        source = (report.get("library") or {}).get("equivalent_file") or "properties/mutants/equivalent.toml"
        console.print(f"[cyan]{len(equivalent)} mutant(s) marked equivalent[/] ({source}):")
        for m in equivalent:
            console.print(f"    {m['name']}: {m['note']}", highlight=False, markup=False)

    apart = report.get("not_observable_here") or []
    reach = [m for m in apart if m.get("out_of_reach")]
    if len(apart) > len(reach):
        console.print(f"{len(apart) - len(reach)} mutant(s) detectable only on another backend, listed apart (not scored): "
                      + ", ".join(sorted({b for m in apart if not m.get('out_of_reach') for b in m['backends']})),
                      highlight=False)
    if reach:
        console.print(f"[yellow]{len(reach)} mutant(s) out of the cases' reach here, listed apart (not scored, "
                      "not detected):[/]", highlight=False)
        for m in reach:
            console.print(f"    {m['name']}: needs {m['out_of_reach']['needs']}", highlight=False, markup=False)

    spec = report.get("specializations")
    if spec and spec.get("total"):
        per = ", ".join(f"{k} {n}" for k, n in spec["per_kernel"].items())
        alone = spec.get("without_schemata") or {}
        before = (f"; {alone['total']} with each mutant built alone (per kernel: "
                  + ", ".join(f"{k} {n}" for k, n in alone.get("per_kernel", {}).items()) + ")") if alone else ""
        console.print(f"Triton specializations of the mutants' runs (what CUDA compiles): {spec['total']} "
                      f"(per kernel: {per}){before}; {spec['shared_source']} if each kernel's mutants, catalog and "
                      "host ones too, shared one compile per key", highlight=False, markup=False, soft_wrap=True)

    weak = report.get("weak_kills") or []
    if weak:
        console.print(f"[yellow]{len(weak)} kill(s) under {WEAK_MARGIN:g}x the allowed error[/] (a slightly wider "
                      "tolerance would lose them):", highlight=False)
        for w in weak[:20]:
            console.print(f"    {w['margin']:.2f}x {w['op']}/{w['name']}: {w['check']} @ {w['case_id']}",
                          highlight=False, markup=False, soft_wrap=True)
        if len(weak) > 20:
            console.print(f"    ... and {len(weak) - 20} more in the report", highlight=False)
    for line in library_tests.print_lines(report):
        console.print(line, highlight=False, markup=False)
    c = report["counts"]
    score = "n/a" if report["score"] is None else f"{report['score']:.4f}"
    verdict = "[green]PASS[/]" if report["passed"] else "[red]FAIL[/]"
    console.print(
        f"{verdict} score {score} (min {report['min_score']}) = {report['detected']} detected / "
        f"({report['total']} total - {c['incompetent']} incompetent - {c['equivalent']} equivalent); "
        + ", ".join(f"{s} {c[s]}" for s in STATUS_ORDER)
        + f"; {len(report['minimal_cases'])} case(s) kill them all; {report['seconds']:.0f} s; report: {path}",
        highlight=False,
    )


def minimal_cases(mutants: list[dict]) -> list[dict]:
    """A small set of cases that together kill every detected mutant (greedy set cover over the
    observed kills, ``mutants`` as mutation.json records: name, detected, killed_by), largest
    first, each with the mutants it kills and a repro."""
    kills: dict[str, set[str]] = {}
    repro: dict[str, str] = {}
    for m in mutants:
        kb = m.get("killed_by")
        if m["detected"] and kb and kb["case_id"] != "(between cases)":
            kills.setdefault(kb["case_id"], set()).add(m["name"])
            repro.setdefault(kb["case_id"], kb.get("repro", ""))
    left = set().union(*kills.values()) if kills else set()
    chosen = []
    while left:
        case = max(sorted(kills), key=lambda c: len(kills[c] & left))
        covered = kills[case] & left
        chosen.append({"case_id": case, "kills": sorted(covered), "repro": repro[case]})
        left -= covered
    return chosen
