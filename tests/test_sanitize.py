"""sanitize: reading compute-sanitizer's summaries, choosing cases, and the no-GPU path.
Bug classes: a run whose summary was never printed counted as clean; findings lost."""

import os

import pytest
import torch

from floors import rmsnorm_floor
from harness.cli import main
from harness.cli.sanitize import pick_cases
from harness.mutation.sanitizer import parse_summary

MEMCHECK_BAD = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at _rmsnorm_forward+0x1c0
=========     by thread (31,0,0) in block (3,0,0)
========= ERROR SUMMARY: 3 errors
"""


def test_memcheck_errors_and_findings():
    s = parse_summary("memcheck", MEMCHECK_BAD)
    assert s["errors"] == 3
    assert s["findings"] == ["========= Invalid __global__ read of size 4 bytes"]


def test_clean_memcheck():
    assert parse_summary("memcheck", "========= ERROR SUMMARY: 0 errors\n")["errors"] == 0


def test_racecheck_summary():
    s = parse_summary("racecheck", "========= Error: Race reported between Write access at x\n"
                                   "========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)\n")
    assert (s["errors"], s["warnings"]) == (1, 1) and s["findings_total"] == 1


def test_missing_summary_is_not_clean():
    assert parse_summary("memcheck", "Traceback (most recent call last): ...")["errors"] is None


def test_pick_cases_spreads_over_the_list():
    assert pick_cases(list(range(96)), 8) == [0, 12, 24, 36, 48, 60, 72, 84]
    assert pick_cases(list(range(3)), 8) == [0, 1, 2]
    assert pick_cases([], 8) == [] and pick_cases([1], 0) == []


def test_pick_cases_adds_the_parameter_values_the_stride_left_out():
    from harness.cases.case import Case

    # a floor whose shape cycle (3) divides the stride (30 // 8 = 3): the stride alone sees one shape
    shapes = [(1, 1, 1), (17, 33, 63), (3, 2, 1)]
    floor = [Case.of("op", N=shapes[i % 3][0], V=shapes[i % 3][2], dtype=("a", "b")[i // 15], seed=i) for i in range(30)]
    assert pick_cases(floor, 8) == floor[0:24:3]  # the spread alone: only shape (1, 1, 1)
    picked = pick_cases(floor, 8, cover=True)
    assert picked[:8] == floor[0:24:3]  # the spread comes first, unchanged
    assert {c["V"] for c in picked[:8]} == {1}
    assert {c["N"] for c in picked} == {1, 17, 3} and {c["V"] for c in picked} == {1, 63}
    assert len(picked) == 10  # then only as many as add a value not yet seen


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_without_gpu_it_says_so_and_exits_2(capsys):
    assert main(["sanitize"]) == 2
    assert "sanitize needs a CUDA GPU" in capsys.readouterr().err


def test_unknown_tool_is_usage_error():
    assert main(["sanitize", "--tools", "memcheck,bogus"]) == 2


def test_summaries_of_several_processes_add_up():
    text = "========= ERROR SUMMARY: 0 errors\n========= ERROR SUMMARY: 2 errors\n"
    assert parse_summary("memcheck", text)["errors"] == 2


def test_whole_flow_with_a_stand_in_sanitizer(tmp_path, monkeypatch, capsys):
    # a stand-in for compute-sanitizer: drops its own options, runs the driver, prints a summary
    import json
    import stat

    fake = tmp_path / "compute-sanitizer"
    fake.write_text("#!/bin/sh\nwhile [ \"$1\" != \"${1#--}\" ]; do shift 2; done\n\"$@\"\nrc=$?\n"
                    "echo '========= ERROR SUMMARY: 0 errors'\nexit $rc\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    from harness.mutation import sanitizer

    monkeypatch.setattr(sanitizer, "find", lambda: str(fake))
    rc = main(["sanitize", "--tools", "memcheck", "--select", "triton_rmsnorm", "--cases", "2",
               "--report-dir", str(tmp_path)])
    report = json.loads((tmp_path / "sanitize.json").read_text())
    assert rc == 0, report["runs"][0]["output_tail"]
    (run,) = report["runs"]
    assert run["clean"] and run["errors"] == 0 and len(run["driver_lines"]) == 3
    assert "all kernels clean" in capsys.readouterr().out


def test_the_driver_runs_a_mutant_when_asked(tmp_path):
    # the campaign's memcheck second look runs survivors through this driver under compute-sanitizer
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "harness", "sanitize", "--driver", "rmsnorm/cat.r_squared", "--mutants",
                           "--cases", "2", "--cover"], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    starts = [l for l in proc.stdout.splitlines() if l.startswith("driver: start ")]
    # 2 spread cases, then up to 2 more for shapes and values they missed
    assert len(starts) == 4 and "driver: done, 4 case(s) with failed checks" in proc.stdout


def test_without_a_sanitizer_survivors_keep_their_status_and_say_why(monkeypatch):
    from harness.mutation import campaign
    from harness.mutation import memcheck_looks
    from harness.mutation import sanitizer
    from harness.registry.registry import REGISTRY

    monkeypatch.setattr(sanitizer, "available", lambda: None)
    entry = REGISTRY.get("rmsnorm", "triton_rmsnorm")
    survivor = campaign.Outcome(entry, campaign.Status.SURVIVED)
    done = memcheck_looks.second_look([survivor], parallel=2)
    assert done == {"available": False, "checked": 0, "killed": 0}
    assert survivor.status is campaign.Status.SURVIVED and "not available" in survivor.note


def test_a_memcheck_finding_turns_a_survivor_into_a_kill_with_its_case(monkeypatch):
    from harness.mutation import campaign
    from harness.mutation import memcheck_looks
    from harness.mutation import sanitizer
    from harness.registry.registry import REGISTRY

    monkeypatch.setattr(sanitizer, "available", lambda: "/usr/bin/compute-sanitizer")
    finding = {"errors": 3, "clean": False, "problem": "", "seconds": 4.0, "first_finding_case": "rmsnorm:M=3,N=33",
               "findings": ["========= Invalid __global__ read of size 4 bytes"]}
    clean = {"errors": 0, "clean": True, "problem": "", "seconds": 2.0, "first_finding_case": None, "findings": []}
    asked = []
    monkeypatch.setattr(sanitizer, "run_one", lambda s, op, name, tool, **kw: asked.append(kw) or (finding if name == "a" else clean))
    entry = REGISTRY.get("rmsnorm", "triton_rmsnorm")
    import dataclasses

    a = campaign.Outcome(dataclasses.replace(entry, name="a"), campaign.Status.SURVIVED)
    b = campaign.Outcome(dataclasses.replace(entry, name="b"), campaign.Status.SURVIVED)
    done = memcheck_looks.second_look([a, b], parallel=2)
    assert done == {"available": True, "checked": 2, "killed": 1}
    assert a.status is campaign.Status.KILLED and a.killed_by["check"] == "memcheck"
    assert a.killed_by["case_id"] == "rmsnorm:M=3,N=33" and "--mutants --select 'a'" in a.killed_by["repro"]
    assert b.status is campaign.Status.SURVIVED and "clean" in b.note
    assert all(kw["cover"] and kw["mutants"] for kw in asked)  # the spread plus the values it missed
    assert a.killed_by["repro"].endswith("--tools memcheck --cover")


def test_a_finding_is_reported_against_the_case_running_when_it_appeared(tmp_path, monkeypatch):
    import stat

    from harness.mutation import sanitizer

    fake = tmp_path / "compute-sanitizer"
    fake.write_text("#!/bin/sh\nwhile [ \"$1\" != \"${1#--}\" ]; do shift 2; done\n\"$@\"\nrc=$?\n"
                    "echo '========= Invalid __global__ read of size 4 bytes'\n"
                    "echo '========= ERROR SUMMARY: 1 error'\nexit $rc\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    r = sanitizer.run_one(str(fake), "rmsnorm", "triton_rmsnorm", "memcheck", cases=2, timeout=300)
    assert r["errors"] == 1 and not r["clean"] and r["findings"] == ["========= Invalid __global__ read of size 4 bytes"]
    assert r["first_finding_case"] == pick_cases(rmsnorm_floor(), 2)[1].id  # the second (last started) case


def test_a_plugin_kernel_can_be_sanitized(tmp_path, monkeypatch):
    # users' kernels are the ones that most need a memory checker on a GPU (no interpreter guard there)
    import json
    import stat

    fake = tmp_path / "compute-sanitizer"
    fake.write_text("#!/bin/sh\nwhile [ \"$1\" != \"${1#--}\" ]; do shift 2; done\n\"$@\"\nrc=$?\n"
                    "echo '========= ERROR SUMMARY: 0 errors'\nexit $rc\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    from harness.mutation import sanitizer

    monkeypatch.setattr(sanitizer, "find", lambda: str(fake))
    rc = main(["sanitize", "--tools", "memcheck", "--plugin", "examples/plugins/tutorial_rmsnorm.py",
               "--select", "tutorial_rmsnorm", "--cases", "2", "--report-dir", str(tmp_path)])
    report = json.loads((tmp_path / "sanitize.json").read_text())
    assert rc == 0, report["runs"][0]["output_tail"]
    (run,) = report["runs"]
    assert run["kernel"] == "tutorial_rmsnorm" and run["clean"] and len(run["driver_lines"]) == 3
    assert "--plugin" in run["command"]


def test_the_driver_runs_exactly_the_case_it_is_given():
    # the campaign's memcheck first look: the one case that killed the mutant last time
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    case = "rmsnorm:M=3,N=33,dtype=float32,layout=transposed,values=normal,eps=1e-06,seed=7"
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "harness", "sanitize", "--driver", "rmsnorm/cat.r_squared", "--mutants",
                           "--case", case], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    starts = [l for l in proc.stdout.splitlines() if l.startswith("driver: start ")]
    assert starts == [f"driver: start {case}"] and "driver: done, 1 case(s) with failed checks" in proc.stdout


def test_a_malformed_case_is_a_usage_error_before_looking_for_a_gpu(capsys):
    assert main(["sanitize", "--case", "no-colon-here"]) == 2
    assert "must look like 'OP:key=value" in capsys.readouterr().err


def test_interrupted_first_looks_kill_their_sanitizer_runs(tmp_path):
    # Ctrl-C or a CI limit during the campaign: no compute-sanitizer process may outlive it
    import stat
    import time

    from harness.mutation import memcheck_looks
    from harness.registry.registry import REGISTRY

    pids = tmp_path / "pids"
    fake = tmp_path / "compute-sanitizer"
    fake.write_text(f"#!/bin/sh\necho $$ >> {pids}\nexec sleep 120\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    entry = REGISTRY.get("rmsnorm", "triton_rmsnorm")
    looks = memcheck_looks.FirstLooks([(entry, "rmsnorm:M=1,N=1")], parallel=1, sanitizer=str(fake))
    deadline = time.monotonic() + 30
    while not (pids.exists() and looks.running) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert looks.running and not looks.done(f"{entry.op}/{entry.name}")
    started = time.monotonic()
    looks.close(interrupted=True)
    assert time.monotonic() - started < 10
    pid = int(pids.read_text().split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the sanitizer process {pid} outlived the interrupted look")
    assert looks.outcome(f"{entry.op}/{entry.name}") is None  # a look that did not end proves nothing
