"""A failure of the harness's own code (or of an op's declaration) is never the kernel's: the
kernel gets ``verdict: "error"``, the console says ``ERROR (harness)`` with the file:line and the
case id, nothing is recorded against it, the exit status is 3, and a campaign refuses to score."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.execution.job import Job, JobResult, JobStatus
from harness.mutation.campaign import judge_sanity

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "harness_errors"


def _verify(tmp_path: Path, plugin: str, op: str) -> tuple[int, str, dict]:
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "harness", "verify", "--plugin", str(FIXTURES / plugin), "--op", op,
                           "--backend", "interpreter", "--report-dir", str(out), "--no-cache", "--max-examples", "3"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    return proc.returncode, proc.stdout + proc.stderr, json.loads((out / "verify.json").read_text())


def test_a_raising_declaration_is_named_and_the_kernel_gets_no_verdict(tmp_path):
    code, text, report = _verify(tmp_path, "raising_declaration.py", "doubled_raising")
    assert code == 3, text
    (kernel,) = report["kernels"]
    assert kernel["verdict"] == "error" and not kernel["passed"] and kernel["status"] == "harness_error"
    fault = kernel["harness_error"]
    assert "raising_declaration.py:" in fault["declaration"] and "planted" in fault["message"]
    assert fault["case_id"].startswith("doubled_raising:")
    assert not [r for r in report["cases"] if not r["passed"]]  # nothing recorded against the kernel
    assert "ERROR (harness)" in text and "FAIL" not in text.replace("FAILED", "")
    assert fault["case_id"] in text and "raising_declaration.py:" in text
    for rendered in ("index.html", "junit.xml", "summary.md"):
        assert "ERROR (harness)" in (tmp_path / "out" / rendered).read_text(), rendered


def test_the_harness_own_error_names_its_file_and_line(tmp_path):
    code, text, report = _verify(tmp_path, "miscounted_terms.py", "doubled_miscounted")
    assert code == 3, text
    fault = report["kernels"][0]["harness_error"]
    assert fault["declaration"] is None and fault["where"].startswith("harness/ops/derive/tolerance.py:")
    assert "terms returned 1 entries" in fault["message"]
    assert f"the harness raised at {fault['where']}" in text


def test_the_campaign_refuses_to_score_on_a_harness_error():
    job = Job(op="rmsnorm", kernel="triton_rmsnorm", backend="interpreter", seed=0, max_examples=0)
    fault = {"summary": "ERROR (harness): the harness raised at harness/ops/derive/tolerance.py:1 on case c: KeyError: 'x'"}
    sanity = judge_sanity([job], [JobResult(job, JobStatus.HARNESS_ERROR, [], 0, 0.1, harness_error=fault)])
    assert not sanity.passed and sanity.harness_error
    assert "ERROR (harness)" in sanity.reason and "tolerance.py:1" in sanity.reason
