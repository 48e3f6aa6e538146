"""Contract(forward_only=True): an inference kernel is asked for no gradient, every gradient-free
check still runs, and its verdict is "pass (forward only)" in every report; a wrong forward still
fails, and a kernel with no gradient that does not declare it fails naming the declaration."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

import pytest

from harness.errors import RegistryError
from harness.registry.registry import REGISTRY, Contract
from reports import console, html, junit, summary_md, verify_report
from tests.fixtures import declared_io as io_kernels

SOFTMAX = io_kernels.spread("softmax")
RMSNORM = io_kernels.spread("rmsnorm", max_cases=6)
FORWARD_ONLY = Contract(forward_only=True)
GRADIENT_FREE = {"forward", "inputs_unchanged", "output_meta", "repeatable", "no_grad", "fresh_inputs"}


def _summary(op, recs, forward_only=True):
    spec = REGISTRY.op(op)
    return verify_report.kernel_summary(op, recs[0].kernel, [r.to_dict() for r in recs], value_checks=[spec.forward_check,
                                        *spec.grad_checks], forward_only=forward_only)


@pytest.fixture(scope="module")
def softmax_records():
    return io_kernels.records("softmax", io_kernels.softmax_inference, FORWARD_ONLY, SOFTMAX)


def test_a_forward_only_triton_softmax_passes_every_gradient_free_check(softmax_records):
    failed = [f"{r.check} {r.case_id}: {r.message[:200]}" for r in softmax_records if not r.passed]
    assert not failed, "\n".join(failed)
    checks = {r.check for r in softmax_records}
    assert GRADIENT_FREE <= checks
    assert not checks & {"dx", "changed_input"}  # no gradient asked for
    summary = _summary("softmax", softmax_records)
    assert summary["verdict"] == "pass (forward only)" and summary["passed"] and summary["forward_only"] is True
    assert verify_report.verdict_label(summary) == "PASS (forward only)"


def test_its_wrong_twin_fails_the_forward():
    recs = io_kernels.records("softmax", io_kernels.softmax_inference_no_max, FORWARD_ONLY, SOFTMAX)
    assert "forward" in {r.check for r in recs if not r.passed}
    summary = _summary("softmax", recs)
    assert summary["verdict"] == "fail" and not summary["passed"]


def test_a_forward_only_torch_rmsnorm_passes_and_its_wrong_twin_fails():
    good = io_kernels.records("rmsnorm", io_kernels.rmsnorm_inference, FORWARD_ONLY, RMSNORM)
    assert all(r.passed for r in good), [(r.check, r.case_id, r.message[:200]) for r in good if not r.passed]
    assert not {r.check for r in good} & {"dx", "dgamma"}
    assert _summary("rmsnorm", good)["verdict"] == "pass (forward only)"
    bad = io_kernels.records("rmsnorm", io_kernels.rmsnorm_inference_eps_outside, FORWARD_ONLY, RMSNORM)
    assert "forward" in {r.check for r in bad if not r.passed}


@pytest.mark.parametrize("fn", [io_kernels.softmax_inference, io_kernels.softmax_inference_function],
                         ids=["no_graph", "backward_raises_not_implemented"])
def test_an_undeclared_inference_kernel_fails_naming_the_declaration(fn):
    recs = io_kernels.records("softmax", fn, Contract(), SOFTMAX[:2])
    dx = [r for r in recs if r.check == "dx"]
    assert dx and not any(r.passed for r in dx)
    for r in dx:
        assert "returned an output with no gradient" in r.message
        assert "a forward-only (inference) kernel declares Contract(forward_only=True)" in r.message
    assert _summary("softmax", recs, forward_only=False)["verdict"] == "fail"


def test_a_mutant_of_a_forward_only_kernel_is_judged_on_the_gradient_free_checks():
    recs = io_kernels.records("softmax", io_kernels.softmax_inference_no_max, FORWARD_ONLY, SOFTMAX, kind="mutant")
    assert not {r.check for r in recs} & {"dx", "changed_input"}
    assert any(not r.passed for r in recs)  # detected


def test_the_verdict_shows_in_every_report(softmax_records):
    summary = _summary("softmax", softmax_records)
    header = {"backend": "interpreter", "device": "cpu", "seed": 0, "versions": {}, "command": "verify"}
    report = verify_report.build(header, [summary], [r.to_dict() for r in softmax_records])
    assert report["passed"]
    assert json.loads(json.dumps(report))["kernels"][0]["forward_only"] is True
    out = io.StringIO()
    console.print_verify(report, path="verify.json", file=out)
    assert "PASS (forward only)" in out.getvalue()
    assert "PASS (forward only)" in html.render(report, None)
    assert "PASS (forward only)" in summary_md.render(report, None)
    props = {p.get("name"): p.get("value") for p in ET.fromstring(junit.render(report, None)).iter("property")}
    assert props["verdict"] == "PASS (forward only)" and props["forward_only"] == "true"


def test_a_forward_only_declaration_that_is_not_a_bool_is_a_registry_error():
    with pytest.raises(RegistryError, match=r"forward_only"):
        Contract(forward_only="yes")
    assert "forward only" in FORWARD_ONLY.describe()
