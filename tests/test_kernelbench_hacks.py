"""A hack corpus: KernelBench-style candidates built on the patterns that published catalogues of
reward hacking in kernel generation list (zero outputs under loose tolerances, reused memory,
cached results, partial work, hard-coded sizes, NaN wildcards, patched checkers, early exits, test
and harness detection, a shortcut through the reference) and the ways a generated candidate got a
PASS here before (patching the verifier from the process that decides, rewriting the problem file,
working only up to the example's size, being right only under torch.no_grad). Each is run through
``verify --reference ... --candidate ...`` on the interpreter and must FAIL (the rewrite: exit 3, no
verdict); honest candidates, in torch and in Triton, must PASS, a shortcut with its flag (FAIL under
``--strict``). docs/guarantees.md's table says which check catches each, and how KernelBench's own
check (scripts/kernelbench_check.py) fares on the same files.

Bug classes: a check every published hack walks past; a detection that flags honest code.
A hack stops at its first failed case (``-x``): the corpus costs one short run per pattern.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests/fixtures/kernelbench"

# (problem, candidate under hacks/, the checks that may catch it: one of them must fail)
HACKS = [
    ("softmax_problem", "zeros_loose", {"forward"}),
    ("softmax_problem", "returns_input", {"inputs_unchanged"}),
    ("softmax_problem", "reused_output", {"fresh_inputs"}),
    ("softmax_problem", "cached_result", {"fresh_inputs", "no_grad"}),
    ("softmax_problem", "partial_rows", {"forward"}),
    ("softmax_problem", "hardcoded_size", {"forward"}),
    ("softmax_problem", "nan_wildcard", {"forward"}),
    ("softmax_problem", "patches_checkers", {"forward"}),
    ("softmax_problem", "early_exit", {"crash"}),
    ("softmax_problem", "detects_tests", {"forward"}),
    ("softmax_problem", "grad_enabled_wrong", {"grad_modes"}),
    ("softmax_problem", "inference_mode_wrong", {"grad_modes"}),
    ("hacks/big_rows_problem", "up_to_size", {"forward"}),
    ("softmax_problem", "detects_harness", {"forward"}),
    ("softmax_problem", "patches_verifier", {"forward"}),
]
# (problem, candidate, a case to run alone or None for the whole suite, the shortcut it is flagged with or None)
EXAMPLE_CASE = "kb_softmax_problem:x_0=4,x_1=512,dtype=float32,layout=contiguous,values=normal,seed=1"
HONEST = [
    ("softmax_problem", "softmax_exp", None, None),  # torch, written otherwise than the problem: no flag
    ("hacks/big_rows_problem", "swish_exp", None, None),  # the cases beyond the example pass on right code
    # Triton, on its case 4x past the example's row length: no flag
    ("rowmean_problem", "rowmean_triton", "kb_rowmean_problem:x_0=7,x_1=1024,dtype=float32,layout=contiguous,"
                                          "values=normal,seed=1", None),
    ("softmax_problem", "hacks/calls_reference", EXAMPLE_CASE, "calls the reference Model"),
]

def verify(problem: str, candidate: str, report: Path, *more: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "harness", "verify", "--reference", str(FIXTURES / f"{problem}.py"),
                           "--candidate", str(FIXTURES / f"{candidate}.py"), "--backend", "interpreter",
                           "--report-dir", str(report), "--max-examples", "1", *more],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def kernel(report: Path) -> dict:
    (k,) = json.loads((report / "verify.json").read_text())["kernels"]
    return k


@pytest.mark.parametrize("problem, candidate, catches", [
    pytest.param(*h, id=h[1]) for h in HACKS])
def test_each_hack_fails(problem, candidate, catches, tmp_path):
    proc = verify(problem, f"hacks/{candidate}", tmp_path, "-x", "--shards", "1")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "all kernels passed" not in proc.stdout
    k = kernel(tmp_path)
    assert not k["passed"] and k["verdict"] == "fail"
    failed = {name for name, c in k["checks"].items() if c["failed"]}
    assert failed & catches, (failed, catches)


def test_rewriting_the_problem_file_gets_no_verdict(tmp_path):
    problem = tmp_path / "problem.py"
    shutil.copy(FIXTURES / "softmax_problem.py", problem)
    proc = verify(str(problem.with_suffix("")), "hacks/rewrites_problem", tmp_path / "out", "-x", "--shards", "1")
    assert proc.returncode == 3 and "tampered" in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.mark.parametrize("problem, candidate, case, shortcut", HONEST, ids=[h[1].removeprefix("hacks/") for h in HONEST])
def test_honest_candidates_pass_and_a_shortcut_is_named(problem, candidate, case, shortcut, tmp_path):
    proc = verify(problem, candidate, tmp_path, *(("--case", case) if case else ()))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "verify.json").read_text())
    (k,) = report["kernels"]
    assert k["passed"] and k["verdict"] == "pass (forward only)" and k["shortcut"] == shortcut
    assert {"forward", "grad_modes", "no_grad"} <= set(k["checks"])  # the three autograd modes, each compared
    cases = {r["case_id"] for r in report["cases"]}
    if "big_rows" in problem:  # 4x the example's 1024 rows, where the floor stops at 320
        assert any("x_0=4096," in c for c in cases), sorted(cases)[:5]
    summary = (tmp_path / "summary.md").read_text()
    if shortcut:
        assert "PASS (forward only) [shortcut]" in proc.stdout and f"SHORTCUT kb_{Path(problem).name}/" in proc.stdout
        assert f"**Shortcut** `{Path(candidate).name}`: {shortcut}" in summary
        assert f"shortcut: {shortcut}" in (tmp_path / "index.html").read_text()
    else:
        assert "SHORTCUT" not in proc.stdout and "**Shortcut**" not in summary


@pytest.mark.parametrize("candidate, shortcut", [
    ("hacks/calls_reference_reimport", "calls the reference Model"),
    ("softmax_torch", "calls the problem's own torch op (softmax) for the whole computation"),
], ids=["calls_reference_reimport", "softmax_torch"])
def test_a_shortcut_fails_under_strict(candidate, shortcut, tmp_path):
    proc = verify("softmax_problem", candidate, tmp_path, "--strict", "--case", EXAMPLE_CASE)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    k = kernel(tmp_path)
    assert k["shortcut"] == shortcut and not k["passed"] and k["failure_class"] == "shortcut"
    assert "FAIL (shortcut)" in proc.stdout and "FAIL under --strict" in proc.stdout
    assert not any(c["failed"] for c in k["checks"].values())  # every check passed: the flag alone fails it


@pytest.mark.parametrize("candidate, says", [("hacks/returns_input", "correct"), ("hacks/patches_checkers", "correct"),
                                             ("hacks/nan_wildcard", "incorrect")])
def test_kernelbench_check_as_the_table_says(candidate, says):
    """scripts/kernelbench_check.py, which fills docs/guarantees.md's last column, in a process of its own
    (a candidate that patches torch.allclose patches it there)."""
    proc = subprocess.run([sys.executable, "scripts/kernelbench_check.py", str(FIXTURES / "softmax_problem.py"),
                           str(FIXTURES / f"{candidate}.py")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.stdout.split(":")[0].strip() == says and proc.returncode == (0 if says == "correct" else 1), proc.stdout
