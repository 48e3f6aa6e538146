"""The terminal summary of a verify report: one row per kernel, then each failure with its repro."""

from __future__ import annotations


from rich.console import Console
from rich.markup import escape
from rich.table import Table

from reports import failure_groups, verify_report
from reports.terminal import report_console
from vocabulary import Verdict
from vocabulary.records import kernel_summaries

MAX_FAILURES_SHOWN = 12


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3g}"


def failure_text(record: dict, *, max_lines: int = 8) -> str:
    """One failed check as verify prints it: the headline, the message's first lines, the repro.
    The pytest plugin and harness.testing.assert_kernel report failures with this same text."""
    lines = [f"FAIL {record['kernel']} {record['check']} {record['case_id']}"]
    lines += [f"    {line}" for line in (record.get("message") or "").splitlines()[:max_lines]]
    if record.get("repro"):
        lines.append(f"    repro: {record['repro']}")
    return "\n".join(lines)


def _print_self_limited(console: Console, kernel: dict) -> None:
    """The cases the kernel rejected itself (Contract(self_limits=True)) and the coverage they leave."""
    limited = kernel.get("self_limited")
    if not limited:
        return
    counts = lambda d: ", ".join(f"{k} ({n})" for k, n in d.items())  # noqa: E731
    console.print("[yellow]SELF-LIMITED[/] " + escape(
                  f"{kernel['name']}: {limited['cases']} case(s) rejected by the kernel itself, "
                  f"not verified there: layouts {counts(limited['layouts'])}; dtypes {counts(limited['dtypes'])}; "
                  f"shapes {', '.join(limited['shapes'][:8])}{' ...' if len(limited['shapes']) > 8 else ''}; "
                  f"said: {'; '.join(limited['reasons'])}"), highlight=False)
    for case_id in limited["case_ids"][:MAX_FAILURES_SHOWN]:
        console.print(f"    rejected {case_id}", highlight=False, markup=False, soft_wrap=True)
    if len(limited["case_ids"]) > MAX_FAILURES_SHOWN:
        console.print(f"    ... and {len(limited['case_ids']) - MAX_FAILURES_SHOWN} more in the report", highlight=False)


def print_verify(report: dict, *, path: str, file=None) -> None:
    console = report_console(file, min_width=100)
    table = Table(title=f"verify: {report['backend']} on {report['device']}  (seed {report['seed']})")
    for col in ("op", "kernel", "verdict", "cases", "failed cases", "failed checks", "worst err / allowed"):
        # names whole on one line (on a terminal too narrow, folded rather than cut)
        table.add_column(col, justify="right" if col in ("cases", "failed cases", "worst err / allowed") else "left",
                         no_wrap=col in ("op", "kernel", "verdict"), overflow="fold" if col in ("op", "kernel") else "ellipsis")
    for k in kernel_summaries(report):
        failed_checks = ", ".join(
            f"{name} ({c['failed']})" for name, c in k["checks"].items() if c["failed"]
        ) or "-"
        label = verify_report.verdict_label(k)
        colour = "green" if k["passed"] else "yellow" if k.get("verdict") == Verdict.NOT_VERIFIED else "red"
        verdict = f"[{colour}]{escape(label)}[/]"
        if k.get("reused"):  # the saved verdict of an unchanged kernel (harness.incremental)
            verdict += f" reused ({k['reused'].get('saved_at')})"
        table.add_row(k["op"], k["name"], verdict, str(k["cases"]), str(k["failed"]), failed_checks, _fmt(k["worst_err_ratio"]))
    console.print(table)
    for k in kernel_summaries(report):
        t = k.get("time_breakdown") or {}
        if t:
            console.print(
                f"time {k['name']}: kernel runs {t.get('kernel_s', 0):.1f} s, Triton compilation "
                f"{t.get('compile_s', 0):.1f} s, oracle {t.get('oracle_s', 0):.1f} s, checks {t.get('checks_s', 0):.1f} s, "
                f"start-up and case generation {t.get('other_s', 0):.1f} s; "
                f"{k.get('specializations', 0)} Triton specialization(s) (what CUDA compiles)",
                highlight=False,
            )

    for k in kernel_summaries(report):
        if k.get("verdict") == Verdict.ERROR:
            fault = k.get("harness_error") or {}
            text = fault.get("summary", "the harness failed").removeprefix("ERROR (harness): ")
            console.print(f"[red]ERROR (harness)[/] {escape(k['op'])}/{escape(k['name'])}: {escape(text)}",
                          highlight=False, soft_wrap=True)
        if k.get("verdict") == Verdict.NOT_VERIFIED:
            console.print(f"[yellow]NOT VERIFIED[/] {k['name']}: {k.get('unverified_reason')}", highlight=False)
        if k.get("waived"):
            reasons = "; ".join(f"{c}: {why}" for c, why in (k.get("waivers") or {}).items())
            console.print(f"[yellow]WAIVED[/] {k['name']}: {k['waived']} failed check(s) declared deliberate ({reasons})",
                          highlight=False)
        _print_self_limited(console, k)
        if k.get("shortcut"):
            said = "FAIL under --strict" if k.get("strict") else "PASS with this flag; verify --strict fails it"
            console.print(f"[yellow]SHORTCUT[/] {escape(k['op'])}/{escape(k['name'])}: {escape(k['shortcut'])} ({said})",
                          highlight=False, soft_wrap=True)
        if k.get("refused"):
            console.print("[red]REFUSED[/] " + escape(verify_report.refusal_line(k)), highlight=False, soft_wrap=True)
        for check in k.get("stale_waivers") or []:
            console.print(f"[yellow]warning: stale waiver[/] {k['name']}: {check!r} is waived "
                          f"({k['waivers'][check]}) but never failed; remove it from Contract(waive=...)", highlight=False)

    failures = [r for r in report["cases"] if not r["passed"]]
    for g in failure_groups.by_kernel(report["cases"]):  # what the failures share, before them one by one
        console.print(f"[red]FAILURES[/] {escape(g['op'])}/{escape(g['kernel'])}: {escape(g['line'])}",
                      highlight=False, soft_wrap=True)
    for r in failures[:MAX_FAILURES_SHOWN]:
        # never wrapped: a case id or repro line broken over two lines cannot be pasted (a log
        # file or a CI console is narrower than a repro)
        console.print(f"[red]FAIL[/] {r['kernel']} [bold]{r['check']}[/] {r['case_id']}", highlight=False, soft_wrap=True)
        for line in failure_text(r).splitlines()[1:]:
            console.print(line, highlight=False, markup=False, soft_wrap=True)
    if len(failures) > MAX_FAILURES_SHOWN:
        console.print(f"... and {len(failures) - MAX_FAILURES_SHOWN} more failed checks in the report")
    unverified = sum(k.get("verdict") == Verdict.NOT_VERIFIED for k in kernel_summaries(report))
    verdict = "[green]all kernels passed[/]" if report["passed"] else "[red]verification failed[/]"
    if any(k.get("verdict") == Verdict.ERROR for k in kernel_summaries(report)):
        verdict = "[red]no verdict: the harness failed (ERROR (harness) above)[/]"
    if unverified:
        allowed = " (allowed by --allow-unverified)" if report.get("allow_unverified") else " (--allow-unverified accepts it)"
        verdict += f"; {unverified} kernel(s) not verified{allowed}"
    console.print(f"{verdict}; report: {path}")
