"""Failures grouped by what they share (reports.failure_groups), in the console, summary.md and
index.html: 64 failures that are all bfloat16 read as one line, not 64.

Bug class: a report that lists failures one by one, so that "every bf16 case fails" or "only
N >= 257 fails" has to be read off a long list."""

import io

from reports import console, failure_groups, html, summary_md


def _record(i: int, *, passed: bool, dtype: str = "bfloat16", check: str = "forward") -> dict:
    n = 257 + i
    return {"op": "rmsnorm", "kernel": "k", "check": check, "passed": passed, "dtype": dtype,
            "layout": "contiguous" if i % 2 else "transposed", "phase": "floor", "message": "Mismatched elements: 1 / 1",
            "case_id": f"rmsnorm:M=7,N={n},dtype={dtype},layout={'contiguous' if i % 2 else 'transposed'},"
                       f"values=normal,eps=1e-06,seed={i}", "repro": "triton-verify verify --case X",
            "err_ratio": 2.0 if not passed else 0.5, "shape": [[7, n]]}


def _report() -> dict:
    cases = [_record(i, passed=False) for i in range(64)] + [_record(i, passed=True, dtype="float32") for i in range(10)]
    kernel = {"op": "rmsnorm", "name": "k", "passed": False, "verdict": "fail", "cases": 74, "failed": 64,
              "checks": {"forward": {"passed": 10, "failed": 64}}, "worst_err_ratio": 2.0}
    return {"backend": "interpreter", "device": "CPU", "seed": 0, "passed": False, "kernels": [kernel], "cases": cases,
            "versions": {}, "command": "verify", "created": "2026-12-07T00:00:00+00:00"}


def test_the_groups_say_what_every_failure_shares():
    failed = [r for r in _report()["cases"] if not r["passed"]]
    line = failure_groups.group_line(failed)
    assert line.startswith("64 failed check(s) on 64 case(s): checks forward (all); dtype bfloat16 (all); ")
    assert "layout transposed (32), contiguous (32)" in line and "values normal (all)" in line
    assert "sizes M 7, N 257..320" in line
    mixed = failed[:3] + [_record(99, passed=False, dtype="float16", check="dx")]
    assert "dtype bfloat16 (3), float16 (1)" in failure_groups.group_line(mixed)


def test_console_summary_md_and_html_show_the_groups():
    report = _report()
    out = io.StringIO()
    console.print_verify(report, path="verify.json", file=out)
    text = out.getvalue()
    assert "FAILURES rmsnorm/k: 64 failed check(s) on 64 case(s): checks forward (all); dtype bfloat16 (all)" in text
    assert text.index("FAILURES rmsnorm/k") < text.index("FAIL k forward")
    md = summary_md.render(report, None)
    assert "Failures of `k` (rmsnorm): 64 failed check(s) on 64 case(s)" in md and "| dtype | bfloat16 (all) |" in md
    page = html.render(report, None)
    assert 'class="failure-groups"' in page and "bfloat16 (all)" in page
    passing = dict(report, cases=[r for r in report["cases"] if r["passed"]])
    assert "FAILURES" not in (lambda o: (console.print_verify(passing, path="v", file=o), o.getvalue())[1])(io.StringIO())
    assert 'class="failure-groups"' not in html.render(passing, None)
