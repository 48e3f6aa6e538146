"""sanitize: reading compute-sanitizer's summaries, choosing cases, and the no-GPU path.
Bug classes: a run whose summary was never printed counted as clean; findings lost."""

import pytest
import torch

from harness.cli import main
from harness.cli.sanitize import parse_summary, pick_cases

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
    from harness.cli import sanitize

    monkeypatch.setattr(sanitize, "_sanitizer", lambda: str(fake))
    rc = main(["sanitize", "--tools", "memcheck", "--select", "triton_rmsnorm", "--cases", "2",
               "--report-dir", str(tmp_path)])
    report = json.loads((tmp_path / "sanitize.json").read_text())
    assert rc == 0, report["runs"][0]["output_tail"]
    (run,) = report["runs"]
    assert run["clean"] and run["errors"] == 0 and len(run["driver_lines"]) == 3
    assert "all kernels clean" in capsys.readouterr().out
