"""``index.html``: one self-contained page (inline CSS and JS, embedded PNG) from the report dicts.

Reads verify.json / mutation.json (and train-check, exercise, bench results when present) as
plain dicts; never imports kernels or oracles. The case table is filterable by op, kernel,
check, dtype and verdict; the filter state lives in the URL hash (``#verdict=failed&dtype=float16``)
so a link, or a headless browser, can open the page already filtered.
"""

from __future__ import annotations

import base64
from collections import Counter, defaultdict
from pathlib import Path

import jinja2
import markupsafe

from reports import drift, failure_groups, library_tests, mutation_report, plot_cache, plots, timing, verify_report
from vocabulary import Status
from vocabulary.records import CaseStatus, case_status, kernel_summaries

__all__ = ["render", "FILTERS", "FAILURES_PER_GROUP"]

TEMPLATES = Path(__file__).parent / "templates"
FILTERS = ("op", "kernel", "check", "dtype", "verdict")
FAILURES_PER_GROUP = 3
MAX_FAILURE_GROUPS = 40


def _fmt(value, spec: str = ".3g") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def _shape(shape) -> str:
    if not shape:
        return "-"
    return ", ".join("x".join(str(d) for d in s) if s else "scalar" for s in shape)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=jinja2.select_autoescape(("html", "j2")),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = _fmt
    env.filters["shape"] = _shape
    return env


def _kernel_rows(verify: dict) -> list[dict]:
    rows = []
    for k in kernel_summaries(verify):
        checks = k.get("checks") or {}
        rows.append({
            **k,
            "verdict": verify_report.verdict_label(k),
            "refusal": verify_report.refusal_line(k),
            "check_list": [{"name": n, "passed": c.get("passed", 0), "failed": c.get("failed", 0), "waived": c.get("waived", 0),
                            "reason": (k.get("waivers") or {}).get(n), "stale": n in (k.get("stale_waivers") or [])}
                           for n, c in checks.items()],
            "ratio_bar": min(100.0, 100.0 * (k.get("worst_err_ratio") or 0.0)),
        })
    return rows


def _failure_groups(verify: dict) -> tuple[list[dict], int]:
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for r in verify.get("cases", []):
        if not r.get("passed"):
            groups[(r.get("op", ""), r.get("kernel", ""), r.get("check", ""))].append(r)
    out = [
        {"op": op, "kernel": kernel, "check": check, "count": len(recs), "shown": recs[:FAILURES_PER_GROUP]}
        for (op, kernel, check), recs in sorted(groups.items())
    ]
    return out[:MAX_FAILURE_GROUPS], max(0, len(out) - MAX_FAILURE_GROUPS)


def _case_rows(verify: dict) -> list[dict]:
    cases = verify.get("cases", [])
    ordered = sorted(range(len(cases)), key=lambda i: (bool(cases[i].get("passed")), i))
    return [cases[i] for i in ordered]


def _one_case(cases: list[dict]) -> bool:
    """A report of one case (a ``--case`` repro): no error figure, whose picture is the spread over
    many cases (and drawing it, matplotlib's import included, is most of a repro's rendering)."""
    return len({c.get("case_id") for c in cases}) == 1


def _case_rows_html(cases: list[dict]) -> markupsafe.Markup:
    """The case table's rows, built here rather than in the template: a jinja loop over 20,000
    rows costs seconds, this costs a fraction of one. Every value is escaped."""
    esc = markupsafe.escape
    out = []
    for r in cases:
        verdict = case_status(r).value
        op, kernel, check, dtype = (esc(r.get(k, "")) for k in ("op", "kernel", "check", "dtype"))
        case_id = str(r.get("case_id", ""))
        title = f' title="{esc(r["message"])}"' if verdict != CaseStatus.PASSED and r.get("message") else ""
        mismatched = _fmt(r.get("mismatched")) + (f" / {r['numel']}" if r.get("numel") else "")
        out.append(
            f'<tr class="{verdict}" data-op="{op}" data-kernel="{kernel}" data-check="{check}" data-dtype="{dtype}" '
            f'data-verdict="{verdict}"{title}><td>{verdict}</td><td>{op}</td><td>{kernel}</td><td>{check}</td>'
            f'<td><code>{esc(case_id.partition(":")[2] or case_id)}</code></td><td>{dtype}</td><td>{esc(r.get("layout", "-"))}</td>'
            f'<td>{esc(_shape(r.get("shape")))}</td><td>{esc(r.get("phase", "-"))}</td>'
            f'<td class="num">{_fmt(r.get("err_ratio"))}</td><td class="num">{_fmt(r.get("max_abs_err"))}</td>'
            f'<td class="num">{_fmt(r.get("atol"))}</td><td class="num">{_fmt(r.get("rtol"))}</td>'
            f'<td class="num">{esc(mismatched)}</td></tr>'
        )
    return markupsafe.Markup("\n".join(out))


def _filter_options(cases: list[dict]) -> dict[str, list[str]]:
    options = {f: sorted({str(c.get(f, "")) for c in cases}) for f in FILTERS if f != "verdict"}
    options["verdict"] = [s.value for s in sorted(CaseStatus)]
    return options


def _kill_matrix_input(mutation: dict) -> dict:
    """What the kill matrix is drawn from, without the run's clock and paths (its cache key)."""
    keep = ("name", "status", "op")
    return {"mutants": [{**{k: m[k] for k in keep if k in m}, "killed_by": {"check": (m.get("killed_by") or {}).get("check")}
                         if m.get("killed_by") else None} for m in mutation.get("mutants", [])],
            "kill_matrix": mutation.get("kill_matrix") or {}}


def _mutation_context(mutation: dict, figures: plot_cache.PlotCache) -> dict:
    order = mutation_report.STATUS_ORDER
    mutants = sorted(mutation.get("mutants", []), key=lambda m: (order.index(m["status"]) if m.get("status") in order else len(order),
                                                                  m.get("op", ""), m.get("name", "")))
    counts = mutation.get("counts") or dict(Counter(m.get("status") for m in mutants))
    score = mutation.get("score")
    return {
        "score": score,
        "score_text": "n/a" if score is None else f"{score:.4f}",
        "min_score": mutation.get("min_score"),
        "passed": mutation.get("passed"),
        "refused": mutation.get("refused"),
        "interrupted": bool(mutation.get("interrupted")),
        "not_run": mutation.get("not_run") or [],
        "counts": counts,
        "total": mutation.get("total", len(mutants)),
        "detected": mutation.get("detected", sum(bool(m.get("detected")) for m in mutants)),
        "mutants": mutants,
        "survivors": [m for m in mutants if m.get("status") == Status.SURVIVED],
        "equivalent": [m for m in mutants if m.get("status") == Status.EQUIVALENT],
        "out_of_reach": [m for m in mutation.get("not_observable_here") or [] if m.get("out_of_reach")],
        "minimal_cases": mutation.get("minimal_cases") or [],
        "seconds": mutation.get("seconds"),
        "created": mutation.get("created"),
        "device": mutation.get("device"),
        "command": mutation.get("command"),
        "heatmap": figures.draw(plots.kill_matrix_figure, _kill_matrix_input(mutation)),
        "library": _library_context(mutation),
    }


def _library_context(mutation: dict) -> dict | None:
    """A library campaign: per module, the harness's and the tests' scores and the 2x2; the
    mutants the tests miss but the harness kills, and those only the tests kill."""
    if not library_tests.is_library(mutation):
        return None
    mutants = mutation.get("mutants", [])
    return {"tests": mutation.get("tests"), "modules": mutation.get("by_module") or library_tests.by_module(mutants),
            "tests_missed": library_tests.tests_missed(mutants), "harness_missed": library_tests.harness_missed(mutants),
            "cells": library_tests.CELLS, "titles": library_tests.CELL_TITLES}


def _embedded_png(directory: Path | None, path: str | None) -> str | None:
    if not path:
        return None
    candidates = [Path(path)]
    if directory is not None:
        candidates.append(directory / Path(path).name)
    for p in candidates:
        if p.is_file():
            return base64.b64encode(p.read_bytes()).decode("ascii")
    return None


def _extras_context(extras: dict[str, dict], directory: Path | None) -> list[dict]:
    """train-check, exercise and bench results: verdict plus their own listed conditions."""
    out = []
    for name, data in sorted(extras.items()):
        items = []
        for cond in data.get("conditions") or []:
            items.append({"passed": cond.get("passed"), "text": f"{cond.get('name', '')}: {cond.get('detail', '')}"})
        for exp in data.get("expectations") or []:
            items.append({"passed": exp.get("passed"), "text": exp.get("what", "")})
        for goal in [g for g in data.get("targets") or [] if g.get("text")]:  # bench: each goal, met or the gap, what limits it
            limited = f"; limited by: {goal['limited_by']}" if goal.get("limited_by") else ""
            items.append({"passed": goal.get("met"), "label": "met" if goal.get("met") else "not met",
                          "text": f"{goal.get('text', '')}{limited}"})
        results = [r for r in data.get("results") or [] if isinstance(r, dict)]
        out.append({
            "name": name,
            "passed": data.get("passed"),
            "device": data.get("device"),
            "command": data.get("command"),
            "conditions": items,
            "results": results,
            "notes": data.get("notes") or [],
            "png": _embedded_png(directory, data.get("plot")),
        })
    return out


def _timing_rows(verify, mutation, extras) -> list[dict]:
    """The steps' wall times with a bar width (px) relative to the longest."""
    steps = timing.rows(verify, mutation, extras)
    longest = max((s["seconds"] or 0.0 for s in steps), default=0.0)
    return [{**s, "bar": 240.0 * (s["seconds"] or 0.0) / longest if longest else 0.0} for s in steps]


def render(verify: dict | None, mutation: dict | None, extras: dict[str, dict] | None = None,
           *, directory: str | Path | None = None) -> str:
    """The page as a string. At least one of ``verify`` and ``mutation`` must be given."""
    if verify is None and mutation is None:
        raise ValueError("render() needs verify.json or mutation.json data")
    directory = Path(directory) if directory is not None else None
    figures = plot_cache.PlotCache(directory)
    # fields a report of an older or newer harness may lack render as "-", never as an error
    header = {"backend": "?", "device": None, "versions": {}, "seed": None, "command": None, "created": None, **(verify or mutation)}
    cases = _case_rows(verify) if verify else []
    failures, failures_left = _failure_groups(verify) if verify else ([], 0)
    verdicts = [r["passed"] for r in (verify, mutation) if r is not None and r.get("passed") is not None]
    verdicts += [e.get("passed") for e in (extras or {}).values() if e.get("passed") is not None]
    context = {
        "header": header,
        "versions": header.get("versions") or {},
        "overall": all(verdicts) if verdicts else None,
        "verify": verify,
        "kernels": _kernel_rows(verify) if verify else [],
        "cases": cases,
        "case_rows": _case_rows_html(cases),
        "failed_cases": sum(1 for c in cases if not c.get("passed")),
        "failures": failures,
        "failure_kernels": failure_groups.by_kernel(cases),
        "failures_left": failures_left,
        "failures_per_group": FAILURES_PER_GROUP,
        "filters": FILTERS,
        "options": _filter_options(cases),
        "error_plot": figures.draw(plots.error_ratio_figure, cases, kernel_summaries(verify))
                      if verify and not _one_case(cases) else None,
        "one_case": _one_case(cases),
        "plots_available": plots.available(),
        "drift": verify.get("baseline") if verify else None,
        "drift_plot": drift.figure(verify.get("cases", [])) if verify and verify.get("baseline") else None,
        "max_panels": plots.MAX_KERNEL_PANELS,
        "mutation": _mutation_context(mutation, figures) if mutation else None,
        "mutation_command": mutation.get("command") if mutation and verify else None,
        "extras": _extras_context(extras or {}, directory),
        "timing": _timing_rows(verify, mutation, extras),
        "directory": str(directory) if directory is not None else "",
        # sources written by an earlier run than the newest (reports/manifest.py), named at the top
        "stale": [(name, data["stale"]) for name, data in (("verify.json", verify), ("mutation.json", mutation),
                                                           *sorted((extras or {}).items())) if data and data.get("stale")],
    }
    figures.prune()
    return _environment().get_template("index.html.j2").render(**context)
