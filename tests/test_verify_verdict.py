"""reports.verify_report: a kernel's verdict from its records alone; nothing compared is not a pass."""

from reports.verify_report import build, kernel_summary

CHECKS = ["forward", "dx", "dgamma"]


def rec(check, case="rmsnorm:M=1", passed=True, err=None):
    return {"check": check, "case_id": case, "passed": passed, "max_abs_err": err}


def test_only_contract_records_are_not_verified():  # bug class: a contract that excludes every case
    s = kernel_summary("rmsnorm", "k", [rec("contract"), rec("contract", "rmsnorm:M=2")], value_checks=CHECKS)
    assert s["verdict"] == "not verified" and s["passed"] is False and "contract" in s["unverified_reason"]


def test_a_value_check_never_compared_is_named():  # bug class: an output the suite never looked at
    records = [rec("forward", err=0.0), rec("dx", err=0.0), rec("dgamma"), rec("output_meta")]
    s = kernel_summary("rmsnorm", "k", records, value_checks=CHECKS)
    assert s["verdict"] == "not verified" and s["unverified_reason"].endswith("dgamma")
    assert s["value_comparisons"] == 2


def test_every_value_check_compared_passes_and_a_failure_fails():
    records = [rec("forward", err=0.0), rec("dx", err=0.0), rec("dgamma", err=1e-9)]
    assert kernel_summary("rmsnorm", "k", records, value_checks=CHECKS)["verdict"] == "pass"
    failed = kernel_summary("rmsnorm", "k", records + [rec("repeatable", passed=False)], value_checks=CHECKS)
    assert failed["verdict"] == "fail" and failed["passed"] is False


def test_the_run_fails_on_not_verified_unless_allowed():
    unverified = kernel_summary("rmsnorm", "k", [rec("contract")], value_checks=CHECKS)
    assert build({}, [unverified], [])["passed"] is False
    assert build({}, [unverified], [], allow_unverified=True)["passed"] is True
