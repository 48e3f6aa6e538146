"""A clean refusal is not a wrong answer: a kernel that raises a clear error before writing anything,
on an in-contract shape it does not support, still fails while the limit is undeclared, but is classed
"refused" in every report with the one-line declaration that accepts it; a kernel that writes before
raising, or answers garbage, stays a plain FAIL (tests/fixtures/refusals.py)."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import pytest

from harness.registry.registry import REGISTRY, Contract
from reports import console, html, junit, summary_md, verify_report
from tests.fixtures import declared_io, refusals

SPEC = REGISTRY.op("rmsnorm")
# rows of 17 columns (inside the fixtures' block of 64) and of 65 (past it), in each dtype
CASES = list({(c["N"], c["dtype"]): c for c in SPEC.floor_cases(backend="interpreter")
              if c["M"] == 7 and c["N"] in (17, 65)}.values())


def _summary(fn, contract=Contract()):
    recs = [r.to_dict() for r in declared_io.records("rmsnorm", fn, contract, CASES)]
    return verify_report.kernel_summary("rmsnorm", fn.__name__, recs, value_checks=[SPEC.forward_check, *SPEC.grad_checks]), recs


def test_the_cases_hold_rows_on_both_sides_of_the_block():
    assert {c["N"] for c in CASES} == {17, 65} and len({c["dtype"] for c in CASES}) == 3


@pytest.mark.parametrize("fn, declaration", [
    (refusals.refuses_long_rows, "Contract(max_n=64), raising ValueError there rather than RuntimeError"),
    (refusals.asserts_long_rows, "Contract(self_limits=True)"),
    (refusals.refuses_fp16, "Contract(self_limits=True)"),
], ids=["runtime_error_past_block", "assert_past_block", "value_error_on_fp16"])
def test_a_clean_refusal_fails_classed_refused_with_its_declaration(fn, declaration):
    summary, recs = _summary(fn)
    assert not summary["passed"] and summary["verdict"] == "fail"
    assert summary["failure_class"] == "refused" and verify_report.verdict_label(summary) == "FAIL (refused)"
    assert summary["refused"]["declaration"] == declaration
    failed = [r for r in recs if not r["passed"]]
    assert failed and all(r["check"] == "forward" and r["refused"] for r in failed)
    assert all("a clean refusal (raised before any launch, inputs unchanged)" in r["message"] for r in failed)
    assert declaration in verify_report.refusal_line(summary)


@pytest.mark.parametrize("fn", [refusals.asserts_long_rows, refusals.refuses_fp16])
def test_the_named_declaration_accepts_it(fn):
    summary, _ = _summary(fn, Contract(self_limits=True))
    assert summary["passed"] and summary["self_limited"]["cases"] > 0 and summary["refused"] is None


def test_max_n_accepts_the_limit_once_the_kernel_rejects_with_value_error():
    def refuses_with_value_error(x, gamma, eps):
        if x.shape[-1] > refusals.BLOCK:
            raise ValueError(f"n = {x.shape[-1]} exceeds the block size {refusals.BLOCK}")
        return refusals.refuses_long_rows(x, gamma, eps)

    assert _summary(refuses_with_value_error)[0]["refused"]["declaration"] == "Contract(max_n=64)"
    summary, recs = _summary(refuses_with_value_error, Contract(max_n=64))
    assert summary["passed"] and any(r["check"] == "contract" and r["passed"] for r in recs)


@pytest.mark.parametrize("fn", [refusals.writes_then_raises, refusals.garbage_past_block],
                         ids=["writes_then_raises", "returns_garbage"])
def test_its_wrong_twins_stay_plain_failures(fn):
    summary, recs = _summary(fn)
    assert not summary["passed"] and summary["failure_class"] == "error" and summary["refused"] is None
    assert verify_report.verdict_label(summary) == "FAIL"
    assert not any(r.get("refused") for r in recs)


def test_a_refusal_beside_other_failures_is_classed_by_the_others():
    def rec(check, refused=None, units=None):
        return {"check": check, "passed": False, "refused": refused, "rounding_units": units, "case_id": check}

    assert verify_report.failure_class([rec("forward", "RuntimeError")]) == "refused"
    assert verify_report.failure_class([rec("forward", "RuntimeError"), rec("dx", units=2.0)]) == "precision"
    assert verify_report.failure_class([rec("forward", "RuntimeError"), rec("dx", units=50.0)]) == "error"


def test_every_report_shows_the_class_and_the_declaration():
    summary, recs = _summary(refusals.refuses_long_rows)
    header = {"backend": "interpreter", "device": "cpu", "seed": 0, "versions": {}, "command": "verify"}
    report = verify_report.build(header, [summary], recs)
    assert not report["passed"]
    want = "Contract(max_n=64)"
    out = io.StringIO()
    console.print_verify(report, path="verify.json", file=out)
    assert "FAIL (refused)" in out.getvalue() and "REFUSED" in out.getvalue() and want in out.getvalue()
    page = html.render(report, None)
    assert "FAIL (refused)" in page and want in page
    md = summary_md.render(report, None)
    assert "FAIL (refused)" in md and "**Refused**" in md and want in md
    root = ET.fromstring(junit.render(report, None))
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["verdict"] == "FAIL (refused)" and props["failure_class"] == "refused" and want in props["refused"]
    failures = [f.get("message") for f in root.iter("failure")]
    assert failures and all(m.startswith("fail (refused)") and want in m for m in failures)
