"""A library campaign's two judges side by side: the harness and the library's own tests.

Reads mutation.json's mutants (each with ``module``, ``detected`` and ``killed_by_tests``).
Per module, the 2x2 of the mutants both judges ran: killed by both, by the harness only, by the
tests only, by neither; and the mutants that matter most: those the tests miss but the harness
kills (with their diff and the killing case's repro: a test to add to the library), and those
only the tests kill (a gap of the harness: a property to fix, or a reason it cannot see it).
"""

from __future__ import annotations

from vocabulary import Status

UNSCORED = {s.value for s in Status if not s.scored}  # in neither score
CELLS = ("both", "harness_only", "tests_only", "neither")
CELL_TITLES = {"both": "both", "harness_only": "harness only", "tests_only": "tests only", "neither": "neither"}


def _cell(m: dict) -> str | None:
    tests = m.get("killed_by_tests")
    if tests is None or m.get("status") in UNSCORED:
        return None
    harness = bool(m.get("detected"))
    if harness and tests:
        return "both"
    if harness:
        return "harness_only"
    return "tests_only" if tests else "neither"


def is_library(mutation: dict | None) -> bool:
    return bool(mutation) and any("module" in m for m in mutation.get("mutants", []))


def by_module(mutants: list[dict]) -> dict[str, dict]:
    """module -> mutants, the harness's score, the tests' score and the 2x2 (over the mutants the
    tests ran against; incompetent and equivalent mutants are in neither score)."""
    out: dict[str, dict] = {}
    for m in mutants:
        if "module" not in m:
            continue
        row = out.setdefault(m["module"], {"mutants": 0, "scorable": 0, "harness_detected": 0, "tests_run": 0,
                                           "tests_killed": 0, **{c: 0 for c in CELLS}})
        row["mutants"] += 1
        if m.get("status") not in UNSCORED:
            row["scorable"] += 1
            row["harness_detected"] += bool(m.get("detected"))
        cell = _cell(m)
        if cell is not None:
            row[cell] += 1
            row["tests_run"] += 1
            row["tests_killed"] += bool(m.get("killed_by_tests"))
    for row in out.values():
        row["harness_score"] = row["harness_detected"] / row["scorable"] if row["scorable"] else None
        row["tests_score"] = row["tests_killed"] / row["tests_run"] if row["tests_run"] else None
    return dict(sorted(out.items()))


def tests_missed(mutants: list[dict]) -> list[dict]:
    """Killed by the harness, missed by the tests: a bug the library's tests would let through."""
    return [m for m in mutants if _cell(m) == "harness_only"]


def harness_missed(mutants: list[dict]) -> list[dict]:
    """Killed by the tests only: a gap of the harness."""
    return [m for m in mutants if _cell(m) == "tests_only"]


def merge(parts: list[dict | None]) -> dict | None:
    """The ``tests`` of a campaign split over parts (``mutate --shard``): counts added, score
    recomputed, the samples joined."""
    present = [t for t in parts if t]
    if not present:
        return None
    killed, run = sum(t["killed"] for t in present), sum(t["run"] for t in present)
    samples = [t["sample"] for t in present if t.get("sample")]
    return {**present[0], "killed": killed, "survived": run - killed, "run": run, "score": killed / run if run else None,
            "sample": {"size": sum(s["size"] for s in samples), "of": sum(t["sample"]["of"] if t.get("sample") else t["run"]
                                                                       for t in present),
                       "mutants": [n for s in samples for n in s["mutants"]]} if samples else None}


def _score(value) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def markdown_lines(mutation: dict) -> list[str]:
    if not is_library(mutation):
        return []
    tests = mutation.get("tests")
    lines = ["", "#### harness and the library's tests, per module", ""]
    if tests is None:
        lines += ["the library's tests were not run (`mutate --tests COMMAND`)", ""]
    else:
        lines += [f"tests command: `{tests['command']}`: score **{_score(tests.get('score'))}** "
                  f"({tests['killed']} killed / {tests['run']} run)", ""]
        if tests.get("sample"):
            lines += [f"sample: {tests['sample']['size']} of {tests['sample']['of']} mutants: "
                      + ", ".join(f"`{n}`" for n in tests["sample"]["mutants"]), ""]
    lines += ["| module | mutants | harness score | tests score | both | harness only | tests only | neither |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for module, row in (mutation.get("by_module") or by_module(mutation.get("mutants", []))).items():
        lines.append(f"| `{module}` | {row['mutants']} | {_score(row['harness_score'])} | {_score(row['tests_score'])} | "
                     + " | ".join(str(row[c]) for c in CELLS) + " |")
    for m in tests_missed(mutation.get("mutants", [])):
        by = m.get("killed_by") or {}
        lines += ["", f"- tests miss, harness kills: `{m['name']}` ({by.get('check', '-')} on `{by.get('case_id', '-')}`)",
                  "", "  ```diff", *[f"  {line}" for line in (m.get("diff") or "").splitlines()], "  ```",
                  "", "  ```", f"  {by.get('repro') or '-'}", "  ```"]
    for m in harness_missed(mutation.get("mutants", [])):
        lines += ["", f"- **tests only** (a gap of the harness): `{m['name']}` ({m.get('location') or '-'})"]
    return lines


def print_lines(mutation: dict) -> list[str]:
    """Plain lines for the console after the campaign's table."""
    if not is_library(mutation):
        return []
    out = []
    tests = mutation.get("tests")
    if tests is not None:
        sample = f", sample {tests['sample']['size']} of {tests['sample']['of']}" if tests.get("sample") else ""
        out.append(f"tests {tests['command']!r}: score {_score(tests.get('score'))} ({tests['killed']} killed / "
                   f"{tests['run']} run{sample})")
    for module, row in (mutation.get("by_module") or {}).items():
        out.append(f"  {module}: {row['mutants']} mutants, harness {_score(row['harness_score'])}, tests "
                   f"{_score(row['tests_score'])}; " + ", ".join(f"{CELL_TITLES[c]} {row[c]}" for c in CELLS))
    for m in tests_missed(mutation.get("mutants", [])):
        by = m.get("killed_by") or {}
        out.append(f"TESTS MISS, HARNESS KILLS {m['name']}: {by.get('check', '-')} on {by.get('case_id', '-')}")
        out += [f"    {line}" for line in (m.get("diff") or "").splitlines()]
        out.append(f"    repro: {by.get('repro') or '-'}")
    for m in harness_missed(mutation.get("mutants", [])):
        out.append(f"TESTS ONLY (a gap of the harness) {m['name']} ({m.get('location') or '-'})")
        out += [f"    {line}" for line in (m.get("diff") or "").splitlines()]
    return out
