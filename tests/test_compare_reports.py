"""scripts/compare_reports.py: two runs' reports compared field by field, whatever their order.
Bug classes: a refactor that changes a verdict, a case's status or a mutant's outcome passing
unnoticed; a comparison that reports a difference where only the order (or the clock) changed."""

import copy
import importlib.util
import random
import subprocess
import sys
from pathlib import Path

from reports import jsonio

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "compare_reports.py"
spec = importlib.util.spec_from_file_location("compare_reports_script", SCRIPT)
compare_reports = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_reports)


def _case(kernel: str, n: int, check: str, **fields) -> dict:
    return {"op": "rmsnorm", "kernel": kernel, "case_id": f"rmsnorm:M=2,N={n}", "check": check, "passed": True,
            "message": "", "seconds": 0.1 * n, "timing": {"kernel": 0.01 * n}, **fields}


VERIFY = {
    "passed": False, "seconds": 12.0,
    "kernels": [{"op": "rmsnorm", "name": "good", "verdict": "pass", "seconds": 3.0, "time_breakdown": {"kernel_s": 1.0}},
                {"op": "rmsnorm", "name": "bad", "verdict": "fail", "seconds": 4.0}],
    "cases": [_case("good", 8, "forward"), _case("good", 8, "backward_x"), _case("good", 16, "forward"),
              _case("bad", 8, "forward", passed=False, message="Mismatched elements: 1 / 16"),
              _case("bad", 16, "forward", passed=True, waived="deliberate"),
              _case("bad", 32, "forward", passed=False, inconclusive="out of GPU memory")],
}
MUTATION = {
    "passed": True, "score": 1.0, "seconds": 40.0,
    "mutants": [{"op": "rmsnorm", "name": "cat.a", "status": "killed", "detected": True, "seconds": 1.0},
                {"op": "rmsnorm", "name": "cat.b", "status": "equivalent", "detected": False, "seconds": 2.0}],
}


def _write(root: Path, verify: dict | None = VERIFY, mutation: dict | None = MUTATION, sub: str = "") -> Path:
    where = root / sub
    where.mkdir(parents=True, exist_ok=True)
    if verify is not None:
        (where / "verify.json").write_text(jsonio.dumps(verify))
    if mutation is not None:
        (where / "mutation.json").write_text(jsonio.dumps(mutation))
    return root


def test_the_same_reports_in_another_order_and_with_other_timings_compare_the_same(tmp_path):
    shuffled, mutation = copy.deepcopy(VERIFY), copy.deepcopy(MUTATION)
    random.Random(1).shuffle(shuffled["cases"])
    shuffled["kernels"].reverse()
    mutation["mutants"].reverse()
    for item in shuffled["cases"] + shuffled["kernels"] + mutation["mutants"]:
        item["seconds"] = 99.0
    shuffled["cases"][0]["timing"] = {"kernel": 5.0}
    a, b = _write(tmp_path / "a"), _write(tmp_path / "b", shuffled, mutation)
    assert compare_reports.compare_dirs(a, b, all_fields=True) == []


def test_a_changed_verdict_case_status_or_mutant_status_is_each_named(tmp_path):
    verify, mutation = copy.deepcopy(VERIFY), copy.deepcopy(MUTATION)
    verify["kernels"][1]["verdict"] = "pass"
    verify["cases"][3]["passed"] = True  # failed -> passed
    verify["cases"][4]["waived"] = None  # waived -> passed
    del verify["cases"][1]  # a case's check gone
    mutation["mutants"][0]["status"] = "survived"
    lines = compare_reports.compare_dirs(_write(tmp_path / "a"), _write(tmp_path / "b", verify, mutation))
    assert lines == [
        "mutation.json: mutant rmsnorm/cat.a: killed -> survived",
        "verify.json: kernel rmsnorm/bad: fail -> pass",
        "verify.json: case rmsnorm/good rmsnorm:M=2,N=8 [backward_x]: only in A",
        "verify.json: case rmsnorm/bad rmsnorm:M=2,N=16 [forward]: waived -> passed",
        "verify.json: case rmsnorm/bad rmsnorm:M=2,N=8 [forward]: failed -> passed",
    ]


def test_all_fields_finds_a_changed_message_that_the_statuses_alone_do_not(tmp_path):
    verify = copy.deepcopy(VERIFY)
    verify["cases"][3]["message"] = "Mismatched elements: 2 / 16"
    a, b = _write(tmp_path / "a"), _write(tmp_path / "b", verify)
    assert compare_reports.compare_dirs(a, b) == []
    assert compare_reports.compare_dirs(a, b, all_fields=True) == [
        "verify.json: case rmsnorm/bad rmsnorm:M=2,N=8 [forward] message: "
        "'Mismatched elements: 1 / 16' -> 'Mismatched elements: 2 / 16'"]


def test_reports_are_paired_by_their_path_in_a_report_tree(tmp_path):
    a = _write(tmp_path / "a", sub="interpreter/rmsnorm", mutation=None)
    _write(tmp_path / "a", verify=None, sub="incremental")  # the store's files are not reports
    b = _write(tmp_path / "b", sub="interpreter/rmsnorm", mutation=None)
    _write(tmp_path / "b", sub="interpreter/softmax", mutation=None)
    assert compare_reports.compare_dirs(a, b) == ["interpreter/softmax/verify.json: only in B"]


def test_the_command_exits_1_on_a_difference_0_on_none_2_without_reports(tmp_path):
    a = _write(tmp_path / "a")
    b = _write(tmp_path / "b", mutation={**MUTATION, "score": 0.5})

    def run(*args):
        return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)

    same, differ, empty = run(a, a), run(a, b), run(a, tmp_path / "nothing")
    assert (same.returncode, same.stdout) == (0, "")
    assert differ.returncode == 1 and differ.stdout == "mutation.json: score: 1.0 -> 0.5\n"
    assert empty.returncode == 2 and "not a directory" in empty.stderr and "Traceback" not in empty.stderr


def test_an_ignored_field_is_skipped_at_any_depth(tmp_path):
    # the repro line holds the checkout's path: two checkouts of one revision differ there only
    verify, mutation = copy.deepcopy(VERIFY), copy.deepcopy(MUTATION)
    verify["cases"][0]["repro"] = "/b/.venv/bin/triton-verify verify --case x"
    mutation["mutants"][0]["killed_by"] = {"check": "forward", "repro": "/b/triton-verify mutate"}
    a = _write(tmp_path / "a", {**VERIFY, "cases": [{**VERIFY["cases"][0], "repro": "/a/triton-verify verify --case x"},
                                                     *VERIFY["cases"][1:]]},
               {**MUTATION, "mutants": [{**MUTATION["mutants"][0], "killed_by": {"check": "forward", "repro": "/a/x"}},
                                        MUTATION["mutants"][1]]})
    b = _write(tmp_path / "b", verify, mutation)
    assert len(compare_reports.compare_dirs(a, b, all_fields=True)) == 2
    assert compare_reports.compare_dirs(a, b, all_fields=True, ignore=("repro",)) == []
