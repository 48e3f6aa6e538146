"""Reports never hold a false or stale verdict: non-finite errors render, JSON is strict, a new
source report removes the rendered files of the old one, a rendering failure says so, the report
directory is checked, locked and only the harness's files are touched, Ctrl-C is one line.
The CLI runs in a subprocess, as a user runs it; the rest reads and writes files in-process."""

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.cli import outdir
from harness.cli import report as report_cli
from reports import jsonio, manifest, plots, verify_report, writer

ROOT = Path(__file__).resolve().parent.parent
NONFINITE = "tests/fixtures/nonfinite_rmsnorm.py"
ZERO_ROWS = "rmsnorm:M=2,N=8,dtype=float32,layout=contiguous,values=zero_rows,eps=1e-06,seed=1"
NORMAL = "rmsnorm:M=3,N=33,dtype=float32,layout=contiguous,values=normal,eps=1e-06,seed=5"


def harness(*args, timeout=600):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def strict(path: Path):
    """json.loads that rejects the NaN / Infinity tokens, as jq and browsers do."""
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(path.read_text(), parse_constant=refuse)


def one_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


# --- non-finite errors and stale reports (bug class: a crash in rendering leaves the last PASS standing)

def test_a_failing_run_removes_the_pass_reports_and_nonfinite_errors_render(tmp_path):
    passing = harness("verify", "--backend", "interpreter", "--op", "rmsnorm", "--select", "triton_rmsnorm",
                      "--case", NORMAL, "--report-dir", str(tmp_path))
    assert passing.returncode == 0, passing.stderr
    assert "**PASS**" in (tmp_path / "summary.md").read_text()

    # forgets_eps divides 0 by 0 on rows of zeros; returns_inf writes inf: neither error is finite
    failing = harness("verify", "--backend", "interpreter", "--plugin", NONFINITE, "--select", "forgets_eps,returns_inf",
                      "--case", ZERO_ROWS, "--no-render", "--report-dir", str(tmp_path))
    assert failing.returncode == 1, failing.stderr
    assert not any((tmp_path / n).exists() for n in ("summary.md", "junit.xml", "index.html"))  # no stale PASS
    report = strict(tmp_path / "verify.json")
    assert not report["passed"]
    assert {k["worst_err_ratio"] for k in report["kernels"]} <= {"nan", "inf"}  # encoded, not NaN/Infinity tokens

    rendered = harness("report", "--report-dir", str(tmp_path))
    assert rendered.returncode == 0, rendered.stderr
    summary = (tmp_path / "summary.md").read_text()
    assert "**FAIL**" in summary and "**PASS**" not in summary
    assert "| inf |" in summary or "| nan |" in summary
    assert 'failures="0"' not in (tmp_path / "junit.xml").read_text().split("<testsuite ", 1)[0]
    assert "forgets_eps" in (tmp_path / "index.html").read_text()
    listed = manifest.read(tmp_path)["files"]
    assert listed["summary.md"]["sources"]["verify.json"] == listed["verify.json"]["run"]


def test_json_reports_are_strict_and_read_back_as_floats(tmp_path):
    data = {"max_abs_err": math.nan, "err_ratio": math.inf, "low": -math.inf, "fine": 0.5, "name": "x"}
    path = writer.write_json(tmp_path, "verify.json", data)
    assert strict(path) == {"max_abs_err": "nan", "err_ratio": "inf", "low": "-inf", "fine": 0.5, "name": "x"}
    back = jsonio.loads(path.read_text())
    assert math.isnan(back["max_abs_err"]) and back["err_ratio"] == math.inf and back["low"] == -math.inf
    assert math.isnan(jsonio.loads('{"a": NaN}')["a"])  # bare NaN tokens (Python's json) still read


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.parametrize("text", [
    '{"nan": "nan", "inf" : "-inf", "a": ["inf", "-inf", "nan"]}',  # keys stay strings, values become floats
    '["x\\"nan\\"", "\\"nan", "nan\\\\", "\\\\", "nan", "NaN is \\"inf\\""]',  # escaped quotes: inside strings
    '{"a": "Infinity", "b": "nan ", "c": " inf", "d": "-inf"}',
    '"nan"', '[1, 2.5, null, true]', '{"a": NaN, "b": -Infinity}',
    '{\n "k": [\n  "nan",\n  {"inf":\n "inf"}\n ]\n}',
])
def test_loads_reads_the_nonfinite_strings_as_the_walk_over_every_value_does(text):
    # the fast path (the C parser on the text with those string tokens made bare) against the
    # definition: parse, then turn every string value "nan", "inf", "-inf" into its float
    assert _same(jsonio.loads(text), jsonio.decode(json.loads(text)))


def test_worst_ratio_is_nan_whatever_the_order():
    # max() keeps its first argument against NaN: a NaN case would hide behind a small finite worst
    assert math.isnan(verify_report.worst_ratio([0.1, math.nan, 0.2]))
    assert verify_report.worst_ratio([0.1, math.inf]) == math.inf
    assert verify_report.worst_ratio([None]) is None


@pytest.mark.skipif(not plots.available(), reason="matplotlib is not installed: no figures to draw")
def test_error_plot_draws_nan_and_inf_ratios():
    cases = [{"kernel": "k", "dtype": "float32", "check": c, "err_ratio": r, "numel": 10}
             for c, r in (("forward", math.nan), ("dx", math.inf), ("dgamma", 0.3), ("forward", 0.0))]
    png = plots.error_ratio_figure(cases, [{"name": "k", "passed": False}])
    assert png and len(png) > 1000
    only_nonfinite = plots.error_ratio_figure(cases[:2], [{"name": "k", "passed": False}])
    assert only_nonfinite


def test_a_rendering_failure_leaves_failing_reports_not_the_old_ones(tmp_path, monkeypatch):
    writer.write_json(tmp_path, "verify.json", {"passed": False, "backend": "interpreter", "kernels": [], "cases": []})
    for name in manifest.DERIVED:  # an earlier run's PASS set, written by the harness
        writer.write_text(tmp_path, name, 'PASS failures="0"')
    from reports import html

    monkeypatch.setattr(html, "render", lambda *a, **k: 1 / 0)
    assert report_cli.write_after_run(tmp_path) is False
    assert not (tmp_path / "index.html").exists()
    summary = (tmp_path / "summary.md").read_text()
    assert "rendering FAILED" in summary and "verify.json: **FAIL**" in summary and "PASS" not in summary.split("verify.json")[0]
    assert 'failures="1"' in (tmp_path / "junit.xml").read_text()


def test_held_signals_wait_until_the_report_set_is_written(tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only delivered to the main thread, where the CLI runs")
    # Python's own Ctrl-C handler, whatever an earlier test or library in this worker left there
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with outdir.signals_held():
                os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C while the reports are being written
                time.sleep(0.05)
                for name in manifest.DERIVED:
                    writer.write_text(tmp_path, name, "whole")
    finally:
        signal.signal(signal.SIGINT, before)
    assert all((tmp_path / n).read_text() == "whole" for n in manifest.DERIVED)


def test_a_held_signal_reaches_the_handler_that_was_there_once_the_block_ends(tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are only delivered to the main thread, where the CLI runs")
    seen: list[tuple[int, bool]] = []
    written = tmp_path / "summary.md"
    before = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append((signum, written.exists())))
    try:
        with outdir.signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            assert seen == []  # held
            writer.write_text(tmp_path, "summary.md", "whole")
        time.sleep(0.05)
    finally:
        signal.signal(signal.SIGTERM, before)
    assert seen == [(signal.SIGTERM, True)]  # delivered once, after the file was written


# --- the report directory: writable, locked, only the harness's files

def test_a_report_dir_that_is_a_file_is_refused_before_any_work(tmp_path):
    path = tmp_path / "reports"
    path.write_text("not a directory")
    for report_dir in (path, path / "sub"):
        proc = harness("verify", "--backend", "interpreter", "--report-dir", str(report_dir))
        assert proc.returncode == 2
        assert str(path) in one_line(proc) and "verify:" not in proc.stdout


def test_a_read_only_report_dir_is_refused(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only directories: there is no refusal to see")
    tmp_path.chmod(0o555)
    try:
        proc = harness("report", "--report-dir", str(tmp_path / "out"))
        assert proc.returncode == 2 and "not writable" in one_line(proc)
    finally:
        tmp_path.chmod(0o755)


def test_a_second_run_on_a_locked_report_dir_is_refused(tmp_path):
    writer.write_json(tmp_path, "verify.json", {"passed": True, "backend": "interpreter", "kernels": [], "cases": []})
    fd = outdir.lock(tmp_path, "verify")
    try:
        proc = harness("report", "--report-dir", str(tmp_path))
        assert proc.returncode == 2
        line = one_line(proc)
        assert "in use by another harness run" in line and f"pid {os.getpid()}" in line
        assert not (tmp_path / "summary.md").exists()
    finally:
        outdir.release(fd)
    assert harness("report", "--report-dir", str(tmp_path)).returncode == 0  # free again once released


def test_a_users_summary_is_refused_not_overwritten(tmp_path):
    writer.write_json(tmp_path, "verify.json", {"passed": True, "backend": "interpreter", "kernels": [], "cases": []})
    (tmp_path / "summary.md").write_text("my notes")
    for args in (["report"], ["verify", "--backend", "interpreter", "--case", NORMAL]):
        proc = harness(*args, "--report-dir", str(tmp_path))
        assert proc.returncode == 2
        line = one_line(proc)
        assert str(tmp_path / "summary.md") in line and "not written by the harness" in line
    assert (tmp_path / "summary.md").read_text() == "my notes"
    assert strict(tmp_path / "verify.json")["passed"] is True  # verify refused before running: its JSON is untouched


def test_clean_removes_only_what_the_harness_wrote(tmp_path):
    out = tmp_path / "out"
    writer.write_json(out, "verify.json", {"passed": True})
    writer.write_text(out, "summary.md", "PASS")
    writer.write_json(out / "gpu", "mutation.json", {"passed": True})
    (out / "notes.md").write_text("mine")
    (out / ".notes.tmp").write_text("mine too")
    (out / manifest.KILL_CACHE).write_text(json.dumps({"format": 1, "backends": {}}))  # restored by CI, unlisted
    outdir.release(outdir.lock(out, "verify"))
    proc = subprocess.run([sys.executable, "-m", "reports.clean", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [".notes.tmp", "notes.md"]
    assert "notes.md" in proc.stdout  # named as kept


def _catches(pid: int, sig: int) -> bool:
    """Whether the process has a handler for the signal (/proc's SigCgt mask)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    (mask,) = [line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")]
    return bool(int(mask, 16) & (1 << (sig - 1)))


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:  # the field after the state is the parent's pid
                found.append(int(entry.name))
    return found


def _wait_until_relaying(launcher: int, child_too: bool, timeout: float = 60.0) -> None:
    """Until the launcher relays signals (SIGHUP caught: Python's start-up catches SIGINT alone, and a Ctrl-C
    during any Python's own start-up is a fatal error no program can turn into a clean exit), and, with
    child_too, until its CLI child takes SIGINT (it starts with SIGINT ignored and takes it once ready)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _catches(launcher, signal.SIGHUP) and (
                not child_too or any(_catches(child, signal.SIGINT) for child in _children(launcher))):
            return
        time.sleep(0.001)
    raise AssertionError("the launcher or its CLI child never installed its signal handlers")


def _interrupted_at_start(tmp_path, wait_for_child: bool):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.Popen([sys.executable, "-m", "harness", "verify", "--backend", "interpreter", "--select", "none*",
                             "--report-dir", str(tmp_path)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_until_relaying(proc.pid, child_too=wait_for_child)  # without the child: it may not have started Python yet
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return proc, err


def test_ctrl_c_while_starting_is_one_line(tmp_path):
    proc, err = _interrupted_at_start(tmp_path, wait_for_child=True)
    # 130 from sys.exit; -SIGINT when the signal lands while Python is already exiting (a shell shows 130 for both)
    assert proc.returncode in (130, -signal.SIGINT), err
    assert err.strip().splitlines() == ["interrupted"], err


@pytest.mark.parametrize("attempt", range(3))
def test_ctrl_c_before_the_cli_process_is_ready_is_held_not_lost(tmp_path, attempt):
    # bug class: a signal lost while the child ignored it (the run went on to its end), or delivered during
    # Python's own start-up ("Fatal Python error: init_sys_streams", no verdict)
    proc, err = _interrupted_at_start(tmp_path, wait_for_child=False)
    assert proc.returncode in (130, -signal.SIGINT), err
    assert err.strip().splitlines() == ["interrupted"], err


def test_a_source_from_an_earlier_run_is_marked_stale(tmp_path, monkeypatch):
    from test_reports_data import mutation_report, verify_report

    monkeypatch.delenv(manifest.GROUP_ENV, raising=False)
    monkeypatch.setattr(manifest, "_run", None)
    manifest.begin_run("mutate")
    writer.write_json(tmp_path, "mutation.json", mutation_report())  # last week's campaign
    manifest.begin_run("verify")
    writer.write_json(tmp_path, "verify.json", verify_report())  # today's verify, alone
    report_cli.write_all(tmp_path)
    summary = (tmp_path / "summary.md").read_text()
    mutation_part = summary.split("### mutation testing")[1]
    assert "STALE: written by an earlier run (mutate" in mutation_part
    assert "STALE" not in summary.split("### mutation testing")[0]
    assert "STALE" in (tmp_path / "index.html").read_text()

    # the commands of one `make verify` share a group: nothing is stale
    monkeypatch.setenv(manifest.GROUP_ENV, "make-verify-1")
    for command, name, data in (("mutate", "mutation.json", mutation_report()), ("verify", "verify.json", verify_report())):
        manifest.begin_run(command)
        writer.write_json(tmp_path, name, data)
    report_cli.write_all(tmp_path)
    assert "STALE" not in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("data", [
    {"header": {"seed": 0, "nan": math.nan}, "records": [{"err": math.inf, "case": "a"}, {"err": 0.5, "case": "b"}],
     "empty": [], "none": {}, 1: -math.inf, None: [[1, [math.nan]], (2, 3)], 2.5: True, False: "nan"},
    [math.nan, {"a": [1, 2]}], "text", 3.0, [], {},
])
def test_dumps_lays_out_the_same_values_as_jsons_own_indented_text(data):
    # bug class: the laid-out writer (C-encoded lines under two expanded levels) dropping a value,
    # a non-finite float left a bare NaN token, or a non-string key written otherwise than json does
    text = jsonio.dumps(data)
    assert json.loads(text) == json.loads(json.dumps(jsonio.encode(data), indent=1, allow_nan=False))
    json.loads(text, parse_constant=lambda token: pytest.fail(f"bare {token} in {text}"))
    assert jsonio.dumps(data, indent=None) == json.dumps(jsonio.encode(data), allow_nan=False)
