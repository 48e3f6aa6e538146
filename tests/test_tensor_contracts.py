"""Per-tensor contracts (Contract(contiguous=("x",)), unit_stride, the upstream gradient) and limits
a kernel states itself (Contract(self_limits=True)): a rejection before any launch, inputs
unchanged, is out of contract and listed with its coverage; after a launch or a write it fails; a
kernel that rejects every case is not verified."""

import io
import xml.etree.ElementTree as ET

import markupsafe
import pytest
import torch
import triton
import triton.language as tl

from harness import Contract
from harness.errors import RegistryError
from harness.registry.registry import REGISTRY, load_builtin_ops
from harness.run.runner import run_case
from harness.testing import entry_for
from reports import console, html, junit, verify_report


def spec():
    load_builtin_ops()
    return REGISTRY.op("softmax")


def cases():
    """Small softmax cases in four layouts, one with leading dims."""
    floor = spec().floor_cases(backend="interpreter")
    picked = {}
    for c in floor:
        # more than one row and column: a strided view of one row or column is contiguous
        if int(c["M"]) * int(c["N"]) <= 600 and min(int(c["M"]), int(c["N"])) > 1 and c["layout"] not in picked \
                and c["values"] != "nonfinite":
            picked[c["layout"]] = c
    return [picked[k] for k in ("contiguous", "transposed", "col_sliced", "lead_transposed")]


def run(fn, contract):
    entry = entry_for("softmax", fn, contract=contract)
    return [r.to_dict() for c in cases() for r in run_case(spec(), entry, c, backend="interpreter", device="cpu").records]


def torch_softmax(x):
    return torch.softmax(x.float(), -1).to(x.dtype)


def asserts_contiguous(x):
    assert x.is_contiguous(), "x must be contiguous"
    return torch_softmax(x)


def rejects_everything(x):
    raise NotImplementedError("this build has no kernel for this GPU")


@triton.jit
def _copy(X, Y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + i, tl.load(X + i, mask=i < n), mask=i < n)


def writes_then_raises(x):
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _copy[(triton.cdiv(x.numel(), 1024),)](x.contiguous(), y, x.numel(), BLOCK=1024)
    assert x.is_contiguous(), "x must be contiguous"
    return torch_softmax(x)


def changes_input_then_raises(x):
    if not x.is_contiguous():
        with torch.no_grad():
            x.add_(1.0)
        raise ValueError("x must be contiguous")
    return torch_softmax(x)


def test_a_kernel_stating_its_limit_with_an_assert_passes_and_lists_what_it_rejected():
    records = run(asserts_contiguous, Contract(self_limits=True))
    assert all(r["passed"] for r in records)
    limited = [r for r in records if r.get("self_limited")]
    assert {r["layout"] for r in limited} == {"transposed", "col_sliced", "lead_transposed"}
    assert all("AssertionError: x must be contiguous" in r["self_limited"] for r in limited)
    summary = verify_report.kernel_summary("softmax", "asserts", records, value_checks=("forward", "dx"))
    assert summary["verdict"] == "pass"
    assert summary["self_limited"]["cases"] == 3 and "lead_transposed" in summary["self_limited"]["layouts"]
    out = io.StringIO()
    report = verify_report.build({"backend": "interpreter", "device": "cpu", "seed": 0}, [summary], records)
    console.print_verify(report, path="verify.json", file=out)
    text = out.getvalue()
    assert "SELF-LIMITED asserts: 3 case(s)" in text and limited[0]["case_id"] in text
    name = records[0]["kernel"]  # the reports below draw the kernel's records under its name
    report = verify_report.build({"backend": "interpreter", "device": "cpu", "seed": 0},
                                 [verify_report.kernel_summary("softmax", name, records, value_checks=("forward", "dx"))],
                                 records)
    page = html.render(report, None)
    assert "SELF-LIMITED" in page and "self-limited: 3 case(s)" in page
    assert all(str(markupsafe.escape(r["case_id"])) in page for r in limited)
    suite = next(s for s in ET.fromstring(junit.render(report, None)).iter("testsuite") if s.get("name") == f"verify.softmax.{name}")
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["self_limited"] == "3" and props["verdict"] == "PASS"
    case = next(c for c in suite.iter("testcase") if c.get("name") == "self_limited")
    assert "3 case(s) rejected by the kernel itself" in case.find("skipped").get("message")
    assert all(r["case_id"] in case.find("system-out").text for r in limited)


def test_without_the_declaration_the_same_assert_fails():
    records = run(asserts_contiguous, Contract())
    failed = [r for r in records if not r["passed"]]
    assert failed and all("AssertionError" in r["message"] for r in failed)


@pytest.mark.parametrize("fn, words", [(writes_then_raises, "after launching 1 Triton kernel"),
                                       (changes_input_then_raises, "after modifying its inputs")])
def test_a_rejection_after_a_launch_or_a_write_still_fails(fn, words):
    failed = [r for r in run(fn, Contract(self_limits=True)) if not r["passed"]]
    assert failed and all(words in r["message"] for r in failed if r["check"] == "forward"), failed[0]["message"]


def test_a_kernel_rejecting_every_case_is_not_verified():
    records = run(rejects_everything, Contract(self_limits=True))
    summary = verify_report.kernel_summary("softmax", "none", records, value_checks=("forward", "dx"))
    assert summary["verdict"] == "not verified" and not summary["passed"]
    assert summary["self_limited"]["cases"] == len(cases())


def contiguous_only(x):
    if not x.is_contiguous():
        raise ValueError("x must be contiguous")
    return torch_softmax(x)


def unit_stride_only(x):
    if x.stride(-1) != 1 and x.shape[-1] > 1:
        raise ValueError("x's rows must be contiguous")
    return torch_softmax(x)


def test_per_tensor_contiguity_and_unit_stride():
    records = run(contiguous_only, Contract(contiguous=("x",)))
    assert all(r["passed"] for r in records)
    assert {r["layout"] for r in records if r["check"] == "contract"} == {"transposed", "col_sliced", "lead_transposed"}
    records = run(unit_stride_only, Contract(unit_stride=("x",)))
    assert all(r["passed"] for r in records)
    assert {r["layout"] for r in records if r["check"] == "contract"} == {"transposed"}  # col_sliced rows are unit-stride
    assert not all(r["passed"] for r in run(unit_stride_only, Contract()))


def test_the_upstream_gradient_can_be_required_contiguous():
    records = run(torch_softmax, Contract(contiguous=("upstream",)))
    skipped = [r for r in records if r["check"] == "contract"]
    assert all(r["passed"] for r in records) and skipped
    assert all("not run: upstream non-contiguous" in r["message"] for r in skipped)


def test_contract_fields_are_checked():
    with pytest.raises(RegistryError, match="unknown input"):
        entry_for("softmax", torch_softmax, contract=Contract(contiguous=("y",)))
    with pytest.raises(RegistryError, match="unit_stride"):
        Contract(unit_stride=True)
    with pytest.raises(RegistryError, match="max_leading_dims"):
        Contract(max_leading_dims=-1)
    assert "self_limits" in Contract(self_limits=True, contiguous=("x",)).describe()


def test_the_judge_sees_the_per_tensor_fields_and_limits_the_kernel_process_describes():
    """The judge rebuilds a kernel's contract from what its kernel process describes: per-tensor
    contiguity, unit stride, max_leading_dims and self_limits reach it unchanged."""
    from harness.execution.worker import entry_view as judges_view
    from harness.registry.registry import KernelEntry
    from harness.run.kernel_server import entry_data

    for contract in (Contract(contiguous=("x", "upstream"), unit_stride=("x",), max_leading_dims=1, self_limits=True),
                     Contract(contiguous=True, forward_only=True)):
        entry = KernelEntry("softmax", "k", torch_softmax, contract, "kernel", "test", "tests/test_tensor_contracts.py")
        seen = judges_view("softmax", "k", entry_data(entry)).contract
        assert seen == contract and seen.describe() == contract.describe()
