"""``summary.md``: the short Markdown a CI job summary shows (GitHub's ``$GITHUB_STEP_SUMMARY``).

One verdict line, one row per kernel, the mutation score and survivors, the first failures with
their repro commands. Kept short: the full picture is index.html in the uploaded artifact.
"""

from __future__ import annotations

from reports import drift, failure_groups, library_tests, timing, verify_report
from vocabulary import Status, Verdict
from vocabulary.records import kernel_summaries

__all__ = ["render", "MAX_FAILURES", "MAX_SURVIVORS"]

MAX_FAILURES = 5
MAX_SURVIVORS = 10


def _verdict(passed) -> str:
    return "not run" if passed is None else ("**PASS**" if passed else "**FAIL**")


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.3g}"


def _verify_lines(verify: dict) -> list[str]:
    lines = [
        f"### verify: {_verdict(verify.get('passed'))}",
        "",
        *([f"**{_cell(verify['stale'])}**", ""] if verify.get("stale") else []),
        "| op | kernel | verdict | cases | failed cases | failed checks | worst err / allowed |",
        "|---|---|---|---:|---:|---|---:|",
    ]
    for k in kernel_summaries(verify):
        failed_checks = ", ".join(f"{n} ({c.get('failed')})" for n, c in (k.get("checks") or {}).items() if c.get("failed")) or "-"
        verdict = verify_report.verdict_label(k)
        if k.get("verdict") == Verdict.NOT_VERIFIED:
            verdict = f"NOT VERIFIED ({k.get('unverified_reason') or 'no value compared'})"
        if k.get("reused"):  # the saved verdict of an unchanged kernel, not a run of this gate
            verdict += f" (reused, verdict of {k['reused'].get('saved_at')})"
        lines.append(f"| {_cell(k.get('op'))} | `{_cell(k.get('name'))}` | {verdict} | {k.get('cases')} | {k.get('failed')} "
                     f"| {_cell(failed_checks)} | {_ratio(k.get('worst_err_ratio'))} |")
    for k in kernel_summaries(verify):
        if k.get("verdict") == Verdict.ERROR:
            lines += ["", f"**ERROR (harness)** `{_cell(k.get('name'))}`: "
                          f"{_cell((k.get('harness_error') or {}).get('summary', 'the harness failed'))}"]
        if k.get("waived"):
            reasons = "; ".join(f"`{c}`: {_cell(why)}" for c, why in (k.get("waivers") or {}).items())
            lines += ["", f"Waived `{_cell(k.get('name'))}`: {k['waived']} failed check(s) declared deliberate ({reasons})"]
        if k.get("refused"):
            lines += ["", f"**Refused** {_cell(verify_report.refusal_line(k))}"]
        if k.get("shortcut"):
            lines += ["", f"**Shortcut** `{_cell(k.get('name'))}`: {_cell(k['shortcut'])}"
                          f"{' (FAIL under --strict)' if k.get('strict') else ' (passes with this flag; verify --strict fails it)'}"]
        for check in k.get("stale_waivers") or []:
            lines += ["", f"**Stale waiver** `{_cell(k.get('name'))}`: `{check}` is waived but never failed; remove it"]
    failures = [r for r in verify.get("cases", []) if not r.get("passed")]
    for g in failure_groups.by_kernel(verify.get("cases", [])):
        lines += ["", f"Failures of `{_cell(g['kernel'])}` ({_cell(g['op'])}): {_cell(g['line'].split(':', 1)[0])}", "",
                  "| failed cases by | |", "|---|---|", *(f"| {a} | {_cell(text)} |" for a, text in g["rows"])]
    if failures:
        lines += ["", f"<details><summary>First failures ({min(MAX_FAILURES, len(failures))} of {len(failures)} failed checks)</summary>", ""]
        for r in failures[:MAX_FAILURES]:
            first = (r.get("message") or "(no message)").splitlines()[0]
            lines += [f"- `{r.get('kernel')}` **{r.get('check')}** `{r.get('case_id')}`: {_cell(first)}", "",
                      "  ```", f"  {r.get('repro') or '-'}", "  ```"]
        lines += ["", "</details>"]
    return lines + drift.markdown_lines(verify.get("baseline"))


def _mutation_lines(mutation: dict | None) -> list[str]:
    if mutation is None:
        return ["### mutation testing: not run"]
    stale = [f"**{_cell(mutation['stale'])}**", ""] if mutation.get("stale") else []
    if mutation.get("refused") and not mutation.get("interrupted"):
        return [f"### mutation testing: **REFUSED**", "", *stale, _cell(mutation["refused"])]
    score = mutation.get("score")
    counts = mutation.get("counts") or {}
    lines = [
        f"### mutation testing: {_verdict(mutation.get('passed'))}",
        "",
        *stale,
        *([f"**INTERRUPTED**: {_cell(mutation['refused'])}", ""] if mutation.get("interrupted") else []),
        f"score **{'n/a' if score is None else f'{score:.4f}'}** (min {mutation.get('min_score')}); "
        + ", ".join(f"{s} {n}" for s, n in counts.items()),
    ]
    survivors = [m for m in mutation.get("mutants", []) if m.get("status") == Status.SURVIVED]
    if survivors:
        lines += ["", "Survivors:"]
        lines += [f"- `{m.get('op')}/{m.get('name')}` ({_cell(m.get('location') or '-')}): {_cell(m.get('description') or m.get('operator') or '')}"
                  for m in survivors[:MAX_SURVIVORS]]
        if len(survivors) > MAX_SURVIVORS:
            lines.append(f"- ... and {len(survivors) - MAX_SURVIVORS} more")
    return lines + library_tests.markdown_lines(mutation)


def render(verify: dict | None, mutation: dict | None, extras: dict[str, dict] | None = None) -> str:
    header = verify or mutation or {}
    lines = [f"## Kernel verification: {header.get('backend', '?')} on {header.get('device', '?')} (seed {header.get('seed', '-')})", ""]
    lines += _verify_lines(verify) if verify is not None else ["### verify: not run"]
    lines += [""] + _mutation_lines(mutation)
    for name, data in sorted((extras or {}).items()):
        if data.get("passed") is not None:
            reused = f" (reused, verdict of {data['reused'].get('saved_at')})" if data.get("reused") else ""
            lines += ["", f"### {name}: {_verdict(data.get('passed'))}{reused}"]
        if data.get("stale"):
            lines += ["", f"**{_cell(data['stale'])}**"]
        goals = [g for g in data.get("targets") or [] if g.get("text")]  # bench: each goal, met or the gap, what limits it
        if goals:
            lines += ["", f"### {name}: goals", ""]
            lines += [f"- {'met' if g.get('met') else '**not met**'}: {_cell(g.get('text', ''))}"
                      + (f"; limited by: {_cell(g['limited_by'])}" if g.get("limited_by") else "") for g in goals]
    steps = timing.rows(verify, mutation, extras)
    if steps:
        lines += ["", "### Where the time went", "", "| step | wall s | detail |", "|---|---:|---|"]
        lines += [f"| {s['step']} | {_seconds(s['seconds'])} | {_cell(s['detail'] or '-')} |" for s in steps]
    lines += ["", "Full report: `index.html` in the uploaded report artifact (per-case table, plots, repro commands)."]
    return "\n".join(lines) + "\n"
