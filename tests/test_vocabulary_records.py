"""vocabulary.records: the schema of verify.json's cases and kernels and mutation.json's mutants,
one spelling for the writers and the reports. Bug classes: a field renamed or reordered on one
side of the JSON boundary only (outside tools read these names); a field written that the schema
does not name; a reader that recomputes what a record amounts to in its own words."""

import dataclasses
import json

import pytest

from harness import shortcut

from harness.cli import main
from harness.mutation.outcome import Outcome
from harness.registry.registry import Contract, KernelEntry
from reports import html, merge, summary_md, verify_report
from vocabulary import Status
from vocabulary.records import (CaseRecord, CaseStatus, KernelSummary, MutantRecord, case_status, kernel_summaries,
                                kernel_summary_from_json)

# the contract: these names, in this order, are what verify.json and mutation.json hold
CASE_FIELDS = [
    "op", "kernel", "check", "case_id", "shape", "dtype", "layout", "passed", "max_abs_err", "max_rel_err", "atol",
    "rtol", "mismatched", "worst_index", "repro", "err_ratio", "numel", "message", "phase", "seconds",
    "specializations", "timing", "waived", "baseline", "rounding_units", "declared_precision", "self_limited",
    "refused", "inconclusive", "shortcut",
]
MUTANT_FIELDS = [
    "op", "name", "origin", "operator", "location", "diff", "description", "status", "detected", "killed_by",
    "seconds", "note", "gpu", "specializations",
]
LIBRARY_FIELDS = ["module", "function", "kernel", "fingerprint"]


def _record(**fields) -> dict:
    base = dict(op="rmsnorm", kernel="k", check="forward", case_id="rmsnorm:M=2,N=8", shape=[[2, 8]],
                dtype="float32", layout="contiguous", passed=True, max_abs_err=0.0)
    return CaseRecord(**{**base, **fields}).to_dict()


def test_a_case_record_holds_the_contracted_fields_in_order_and_reads_back():
    record = _record(phase="shrunk")
    assert list(record) == CASE_FIELDS
    assert record["phase"] == "shrunk" and type(record["phase"]) is str
    assert CaseRecord.from_dict({**record, "unknown_later_field": 1}).to_dict() == record


def test_what_a_case_record_amounts_to_is_one_rule_for_every_report():
    failed = _record(passed=False)
    assert [case_status(r) for r in (_record(), failed, _record(waived="why"), _record(passed=False, inconclusive="oom"))] == [
        CaseStatus.PASSED, CaseStatus.FAILED, CaseStatus.WAIVED, CaseStatus.INCONCLUSIVE]
    assert CaseRecord.from_dict(failed).status is CaseStatus.FAILED
    # the kernel summary counts by it, and the case table shows it: an inconclusive case is not a failure
    summary = verify_report.kernel_summary("rmsnorm", "k", [_record(), _record(passed=False, inconclusive="oom")])
    assert summary["checks"] == {"forward": {"passed": 1, "failed": 0, "inconclusive": 1}}
    row = html._case_rows_html([_record(passed=False, inconclusive="oom")])
    assert 'data-verdict="inconclusive"' in row
    assert html._filter_options([])["verdict"] == ["failed", "inconclusive", "passed", "waived"]


def test_a_kernel_summary_writes_only_fields_the_schema_names():
    # targets: a writer that renames or adds a field the readers do not know (read as absent)
    records = [_record(), _record(check="contract", max_abs_err=None)]
    summary = verify_report.kernel_summary(
        "rmsnorm", "k", records, value_checks=["forward"], origin="project", contract="unrestricted", plugin=None,
        seconds=1.0, worker_seconds=1.0, shards=1, harness_error=None, reused={"key": "x", "saved_at": "now"})
    assert set(summary) <= set(KernelSummary.__annotations__), set(summary) - set(KernelSummary.__annotations__)
    assert summary["verdict"] == "pass"
    flagged = [{**summary, "passed": True, "shortcut": shortcut.MODEL}]
    shortcut.apply_strict(flagged, strict=True)  # the other writer of a summary's fields
    assert not flagged[0]["passed"] and set(flagged[0]) <= set(KernelSummary.__annotations__)


def test_reports_read_kernel_summaries_through_the_schema_and_a_missing_field_fails_there(tmp_path, capsys):
    # targets: a required field renamed by the writer that every reader takes for absent; a report
    # refused (or verify crashed while printing) over a field added to verify.json
    summary = verify_report.kernel_summary("rmsnorm", "k", [_record()], value_checks=["forward"])
    report = verify_report.build({"backend": "interpreter", "device": "cpu", "seed": 0}, [summary], [_record()])
    assert kernel_summaries(report) == [summary]
    extended = {**summary, "added_by_a_tool": 1}
    assert kernel_summaries({"kernels": [extended]}) == [extended]  # carried through
    renamed = {("pass" if k == "passed" else k): v for k, v in summary.items()}
    with pytest.raises(ValueError, match="kernel rmsnorm/k: missing field.s. passed"):
        kernel_summaries({"kernels": [renamed]})
    with pytest.raises(ValueError, match="missing field.s. passed"):  # a renderer reads through it too
        summary_md.render({**report, "kernels": [renamed]}, None, {})
    (tmp_path / "verify.json").write_text(json.dumps({**report, "kernels": [renamed]}))
    assert main(["report", "--report-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "missing field(s) passed" in err and len(err.splitlines()) == 1


def _entry(**meta) -> KernelEntry:
    return KernelEntry("rmsnorm", "cat.drop_eps", lambda: None, Contract(), "mutant", "catalog", "m.py:3",
                       description="drops eps", meta={"operator": "drop", "location": "k.py:10", "diff": "-a\n+b", **meta})


def test_a_mutant_record_holds_the_contracted_fields_and_reads_back():
    data = Outcome(_entry(), Status.KILLED, {"check": "forward", "case_id": "c"}, 1.23456).to_dict()
    assert list(data) == MUTANT_FIELDS
    assert data["status"] == "killed" and type(data["status"]) is str and data["detected"] is True
    assert data["seconds"] == 1.235
    assert MutantRecord.from_json(data).to_json() == data
    assert MutantRecord.from_json({**data, "killed_by_tests": True}).status is Status.KILLED  # extensions are ignored


def test_a_library_mutant_adds_its_module_and_a_reused_outcome_its_origin():
    entry = _entry(module="lib.ops", function="f", kernel="carrier", fingerprint="abc")
    data = Outcome(entry, Status.SURVIVED, None, 0.5, reused_from="2026-12-07").to_dict()
    assert list(data) == MUTANT_FIELDS + LIBRARY_FIELDS + ["reused_from"]
    assert (data["module"], data["kernel"], data["reused_from"]) == ("lib.ops", "carrier", "2026-12-07")
    assert MutantRecord.from_json(data).to_json() == data


def test_the_merge_scores_mutant_records_with_the_campaign_s_score():
    mutants = [Outcome(dataclasses.replace(_entry(), name=f"m{i}"), status, None, 0.0).to_dict()
               for i, status in enumerate([Status.KILLED, Status.SURVIVED, Status.EQUIVALENT, Status.TIMEOUT])]
    part = {"shard": {"index": 0, "count": 1}, "mutants": mutants, "sanity": {"passed": True, "runs": []}}
    merged = merge.merge_mutation([("a", part)])
    assert merged["score"] == 2 / 3  # killed and timeout detected, of three scored (equivalent is not)
    assert merged["counts"]["survived"] == 1 and merged["kill_matrix"] == {}
