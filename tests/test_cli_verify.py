"""python -m harness verify: exit codes, usage errors without tracebacks, plugins, isolation.
These run the real CLI in a subprocess, as a user would."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def harness(*args, timeout=600):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    return proc


@pytest.mark.parametrize(
    "args, words",
    [
        (["verify", "--op", "nope"], "unknown op 'nope'"),
        (["verify", "--backend", "tpu"], "unknown backend 'tpu'"),
        (["verify", "--shards", "0"], "--shards: expected a whole number >= 1"),
        (["verify", "--plugin", "does/not/exist.py"], "plugin file not found"),
        (["verify", "--plugin", "tests/fixtures/broken_plugin.py"], "failed to import (line 5): RuntimeError"),
        (["verify", "--plugin", "tests/fixtures/duplicate_plugin.py"], "duplicate name 'triton_rmsnorm'"),
        (["verify", "--plugin", "tests/fixtures/wrong_signature_plugin.py"], "takes (x, gamma) but op 'rmsnorm' calls it"),
        (["verify", "--select", "no_such_kernel*"], "matches no kernel"),
        (["verify", "--max-examples", "many"], "expected a whole number"),
        (["verify", "--case", "garbage"], "must look like"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_usage_exits_2_with_one_line_and_no_traceback(args, words, tmp_path):
    if args[0] == "verify":  # a directory of its own: the tests run side by side, and a report directory is locked per run
        args = [*args, "--report-dir", str(tmp_path)]
    proc = harness(*args, "--backend", "interpreter") if "--backend" not in args and args[0] == "verify" else harness(*args)
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_correct_plugin_passes_and_named_mutants_fail_case_by_case(tmp_path):
    proc = harness(
        "verify", "--backend", "interpreter", "--max-examples", "3", "--report-dir", str(tmp_path),
        "--plugin", "examples/plugins/tutorial_rmsnorm.py", "--plugin", "examples/plugins/tutorial_rmsnorm_bugs.py",
        "--select", "tutorial*",
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads((tmp_path / "verify.json").read_text())
    verdicts = {k["name"]: k for k in report["kernels"]}
    assert verdicts["tutorial_rmsnorm"]["passed"] and verdicts["tutorial_rmsnorm"]["failed"] == 0
    block, mean = verdicts["tutorial_div_by_block"], verdicts["tutorial_dgamma_mean"]
    assert not block["passed"] and block["checks"]["forward"]["failed"] > 0 and block["checks"]["dx"]["failed"] > 0
    assert not mean["passed"] and mean["checks"]["dgamma"]["failed"] > 0 and "forward" not in {
        c for c, v in mean["checks"].items() if v["failed"]}
    failures = [c for c in report["cases"] if not c["passed"]]
    assert all(c["repro"] and c["message"] for c in failures)
    # the tutorial's point: N == BLOCK hides the divisor bug
    block_cases = {c["case_id"]: c["passed"] for c in report["cases"] if c["kernel"] == "tutorial_div_by_block" and c["check"] == "forward"}
    assert any(",N=256," in cid and ok for cid, ok in block_cases.items())
    assert any(",N=257," in cid and not ok for cid, ok in block_cases.items())
    for field in ("backend", "versions", "seed", "device"):
        assert field in report
    assert "FAIL" in proc.stdout and "repro:" in proc.stdout


def test_repro_command_reruns_exactly_one_case(tmp_path):
    case = "rmsnorm:M=17,N=257,dtype=float32,layout=contiguous,values=normal,eps=1e-06,seed=5"
    proc = harness("verify", "--backend", "interpreter", "--plugin", "examples/plugins/tutorial_rmsnorm_bugs.py",
                   "--select", "tutorial_div_by_block", "--case", case, "--report-dir", str(tmp_path))
    assert proc.returncode == 1
    report = json.loads((tmp_path / "verify.json").read_text())
    assert {c["case_id"] for c in report["cases"]} == {case}
    assert {c["phase"] for c in report["cases"]} == {"explicit"}
    assert (tmp_path / "index.html").is_file() and (tmp_path / "summary.md").is_file()  # rendered by default


def test_no_render_writes_verify_json_only(tmp_path):
    # make verify renders once at its end; verify's own rendering would be done twice
    case = "rmsnorm:M=3,N=33,dtype=float32,layout=contiguous,values=normal,eps=1e-06,seed=5"
    proc = harness("verify", "--backend", "interpreter", "--op", "rmsnorm", "--case", case, "--no-render",
                   "--report-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # besides verify.json only the report directory's bookkeeping (manifest, lock file, incremental store)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".harness-lock", ".harness-manifest.json", "incremental",
                                                          "verify.json"]


def test_crashing_and_hanging_kernels_are_recorded_and_the_run_finishes(tmp_path):
    # the watchdog catches the hang within seconds; the job limit (--timeout) only backs it up, and
    # leaves room for the fresh kernel processes that follow each crash on a loaded machine
    proc = harness("verify", "--backend", "interpreter", "--max-examples", "0", "--timeout", "600", "--watchdog", "5",
                   "--jobs", "3",
                   "--plugin", "tests/fixtures/crashing_rmsnorm.py", "--select", "[ash]*", "--report-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stderr
    report = json.loads((tmp_path / "verify.json").read_text())
    status = {k["name"]: k["status"] for k in report["kernels"]}
    assert status == {"segfaults": "crashed", "aborts": "crashed", "hangs": "timeout"}
    messages = {c["kernel"]: c["message"] for c in report["cases"] if c["check"] in ("crash", "timeout")}
    assert "SIGSEGV" in messages["segfaults"] and "SIGABRT" in messages["aborts"] and "killed" in messages["hangs"]
    crash = next(c for c in report["cases"] if c["kernel"] == "segfaults" and c["check"] == "crash")
    assert crash["case_id"].startswith("rmsnorm:") and "--case" in crash["repro"]


def test_the_liger_example_without_liger_says_what_to_install(tmp_path):
    import importlib.util

    # this checks the message for a missing dependency; where liger-kernel is installed there is
    # no missing dependency to report (CI has none, so CI runs it)
    if importlib.util.find_spec("liger_kernel") is not None:
        pytest.skip("liger-kernel is installed here: the example runs instead of failing")
    proc = harness("verify", "--backend", "interpreter", "--plugin", "examples/plugins/liger_flce.py",
                   "--report-dir", str(tmp_path / "out"), timeout=120)
    assert proc.returncode == 2 and "pip install liger-kernel" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_exitfirst_stops_at_the_first_failed_case_and_starts_no_other_kernel(tmp_path):
    # bug class: a long run that keeps going after the answer is known (-x, as pytest's)
    proc = harness("verify", "-x", "--backend", "interpreter", "--plugin", "tests/fixtures/torch_wrong_ops.py",
                   "--select", "wrong_*", "--jobs", "1", "--max-examples", "0", "--report-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "verify.json").read_text())
    assert report["exitfirst"] is True and not report["passed"]
    (kernel,) = report["kernels"]  # one job at a time: the first kernel failed, no other started
    assert kernel["verdict"] == "fail"
    failed = {c["case_id"] for c in report["cases"] if not c["passed"]}
    assert len(failed) == 1 and report["cases"][-1]["case_id"] in failed  # nothing ran after the failed case
    assert "stopped at the first failure (-x); not run: " in proc.stderr and "swiglu/wrong_sigmoid_b" in proc.stderr


def test_failed_first_runs_the_last_runs_failing_case_first(tmp_path):
    # bug class: a fix checked by waiting for the whole floor before the case that failed comes up
    late = "rmsnorm:M=7,N=255,dtype=float32,layout=contiguous,values=nonfinite,eps=1e-12,seed=421764"
    last = {"backend": "interpreter", "kernels": [], "cases": [
        {"op": "rmsnorm", "kernel": "tutorial_div_by_block", "check": "forward", "case_id": late, "passed": False}]}
    (tmp_path / "verify.json").write_text(json.dumps(last))
    from reports import manifest

    manifest.record(tmp_path, "verify.json")  # as the last run wrote it
    proc = harness("verify", "-x", "--failed-first", "--backend", "interpreter", "--plugin",
                   "examples/plugins/tutorial_rmsnorm_bugs.py", "--select", "tutorial_div_by_block", "--jobs", "1",
                   "--max-examples", "0", "--no-cache", "--report-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "verify.json").read_text())
    assert {c["case_id"] for c in report["cases"]} == {late}  # the first case run failed (-x stopped there)
    assert [k["name"] for k in report["kernels"]] == ["tutorial_div_by_block"]


def test_failed_first_orders_failed_kernels_first_and_reads_no_report_as_none(tmp_path):
    from types import SimpleNamespace

    from harness.incremental.failed_first import kernels_first, last_failures

    assert last_failures(tmp_path) == {}
    (tmp_path / "verify.json").write_text(json.dumps({"cases": [
        {"op": "a", "kernel": "k2", "case_id": "a:N=1", "passed": False},
        {"op": "a", "kernel": "k2", "case_id": "a:N=2", "passed": True},
        {"op": "a", "kernel": "k3", "case_id": "a:N=3", "passed": False, "waived": "declared"}]}))
    assert last_failures(tmp_path) == {"a/k2": ("a:N=1",)}
    entries = [SimpleNamespace(op="a", name=n) for n in ("k1", "k2", "k3")]
    assert [e.name for e in kernels_first(entries, last_failures(tmp_path))] == ["k2", "k1", "k3"]


def test_plugin_alone_verifies_the_plugins_kernels_only(tmp_path):
    # bug class: --plugin without --select silently running every project kernel too (half an hour)
    case = "rmsnorm:M=7,N=31,dtype=float32,layout=contiguous,values=normal,eps=1e-05,seed=1"
    common = ["verify", "--backend", "interpreter", "--plugin", "examples/plugins/quickstart_rmsnorm.py", "--case", case,
              "--no-render", "--no-cache"]
    proc = harness(*common, "--report-dir", str(tmp_path / "mine"))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # the example's deliberate bug
    report = json.loads((tmp_path / "mine" / "verify.json").read_text())
    assert sorted(k["name"] for k in report["kernels"]) == ["my_rmsnorm", "my_rmsnorm_bug"]
    proc = harness(*common, "--with-project", "--report-dir", str(tmp_path / "all"))
    names = [k["name"] for k in json.loads((tmp_path / "all" / "verify.json").read_text())["kernels"]]
    assert "my_rmsnorm" in names and len(names) > 1, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_a_plugin_with_no_kernel_alone_is_a_usage_error(tmp_path):
    (tmp_path / "empty_plugin.py").write_text("import torch\n")
    proc = harness("verify", "--backend", "interpreter", "--plugin", str(tmp_path / "empty_plugin.py"),
                   "--report-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "registers no kernel; add --with-project" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_exitfirst_stops_the_kernels_still_running_and_reports_them_not_run(tmp_path):
    # bug class: -x that lets the other running kernels go on to their end (minutes after the answer
    # is known), or that reports a kernel stopped halfway as PASS on the cases it reached
    proc = harness("verify", "-x", "--backend", "interpreter", "--plugin", "examples/plugins/quickstart_rmsnorm.py",
                   "--jobs", "2", "--shards", "1", "--max-examples", "5", "--no-cache", "--report-dir", str(tmp_path))
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "verify.json").read_text())
    assert report["exitfirst"] is True and not report["passed"]
    assert [(k["name"], k["verdict"]) for k in report["kernels"]] == [("my_rmsnorm_bug", "fail")]
    assert {c["kernel"] for c in report["cases"]} == {"my_rmsnorm_bug"}
    assert "not run: rmsnorm/my_rmsnorm" in proc.stderr and "interrupted" not in proc.stderr


def test_exitfirst_settles_a_stopped_kernel_as_not_run_and_keeps_a_failed_ones_records():
    from harness.execution import exitfirst
    from harness.execution.job import Job, JobResult, JobStatus
    from vocabulary.records import CaseRecord

    def result(kernel, shard, status, passed=()):
        job = Job(op="rmsnorm", kernel=kernel, backend="interpreter", seed=0, max_examples=1, shard=shard, shards=2)
        records = [CaseRecord(op="rmsnorm", kernel=kernel, check="forward", case_id=f"c{i}", shape=[[1]], dtype="float32",
                              layout="contiguous", passed=p)
                   for i, p in enumerate(passed)]
        return JobResult(job, status, records, len(records), 1.0)

    settled = exitfirst.settle([
        result("bad", 0, JobStatus.OK, [True, False]), result("bad", 1, JobStatus.INTERRUPTED, [True]),
        result("half", 0, JobStatus.OK, [True, True]), result("half", 1, JobStatus.INTERRUPTED, [True]),
        result("done", 0, JobStatus.OK, [True]), result("done", 1, JobStatus.OK, [True])])
    assert [(r.job.kernel, r.job.shard, r.status.value, len(r.records)) for r in settled] == [
        ("bad", 0, "ok", 2), ("bad", 1, "skipped", 0),  # the failure stays, the stopped shard is dropped
        ("half", 0, "skipped", 0), ("half", 1, "skipped", 0),  # a shard passed, another stopped: not run
        ("done", 0, "ok", 1), ("done", 1, "ok", 1)]
