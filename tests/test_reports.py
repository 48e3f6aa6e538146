"""index.html, junit.xml, summary.md and ``python -m harness report``, from synthetic records.

Bug classes targeted: a report that needs the network, a kernel message that breaks the page
or the XML, a failure shown without its repro, a missing mutation.json crashing the renderer,
a rendering failure hiding verify's verdict, and a case table too slow to render at scale.
"""

import json
import time
import xml.etree.ElementTree as ET

import pytest

from harness.cli import main
from harness.cli import report as report_cli
from reports import html, junit, plots, summary_md
from test_reports_data import BAD, GOOD, expected_failures, mutation_report, verify_report


@pytest.fixture(scope="module")
def verify_page():
    return html.render(verify_report(), None)


@pytest.fixture(scope="module")
def full_page():
    return html.render(verify_report(), mutation_report())


@pytest.fixture
def report_dir(tmp_path):
    (tmp_path / "verify.json").write_text(json.dumps(verify_report()))
    return tmp_path


# --- index.html -------------------------------------------------------------------------

def test_page_is_self_contained(full_page):
    """Targets: a page that fetches CSS, JS or images from the network (CI artifacts are opened offline)."""
    page = full_page
    for needle in ('src="http', "src='http", 'href="http', "<link", "@import", "url(http"):
        assert needle not in page
    if plots.available():
        assert page.count('src="data:image/png;base64,') == 2  # error plot and kill matrix


def test_a_one_case_report_draws_no_error_figure(monkeypatch):
    """Targets: a --case repro paying matplotlib's import and a drawing (about 0.7 CPU-s of its
    10 s) for a picture of one case; a report of several cases keeps its figure."""
    drawn = []
    monkeypatch.setattr(plots, "error_ratio_figure", lambda cases, kernels: drawn.append(len(cases)) or "UE5H")
    one = verify_report(n_cases=1)
    page = html.render(one, None)
    assert drawn == [] and 'id="error-plot"' not in page
    assert "one case: its checks' errors are in the failures above" in page
    page = html.render(verify_report(n_cases=2), None)
    assert len(drawn) == 1 and 'id="error-plot"' in page and "one case: its checks" not in page


def test_kernel_messages_are_escaped(verify_page):
    """Targets: a message with markup injected into the page."""
    page = verify_page
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_summary_failures_and_repro_are_on_the_page(verify_page):
    data, page = verify_report(), verify_page
    assert GOOD in page and BAD in page
    first_failure = next(r for r in data["cases"] if not r["passed"])
    assert first_failure["repro"] in page
    assert f"{expected_failures(data)} failed check records" in page
    assert data["command"] in page and data["device"] in page


def test_missing_mutation_json_says_not_run(verify_page, full_page):
    assert "mutation testing: not run" in verify_page
    assert "mutation testing: not run" not in full_page


def test_mutation_only_page_shows_survivor_diff_and_says_verify_not_run():
    page = html.render(None, mutation_report())
    assert "verify: not run" in page
    assert "mask = cols &lt;= N" in page  # the survivor's diff, escaped
    assert "eps is an argument" in page  # the reason a mutant is marked equivalent
    assert "0.6667" in page


def test_extras_are_shown_when_present(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "error_ratio_figure", lambda *a: None)
    extras = {"train-check": {"passed": True, "device": "cpu", "conditions": [
        {"name": "forward calls", "passed": True, "detail": "100 (expected 100)"}]}}
    page = html.render(verify_report(), None, extras, directory=tmp_path)
    assert "train-check" in page and "forward calls: 100 (expected 100)" in page


def test_thousands_of_cases_render_quickly():
    """Targets: a renderer that is quadratic in the number of records."""
    data = verify_report(n_cases=1000)  # 2 kernels x 4 checks x 1000 = 8000 rows
    started = time.monotonic()
    page = html.render(data, None)
    assert time.monotonic() - started < 20
    assert page.count('<tr class="') == len(data["cases"])


# --- junit.xml --------------------------------------------------------------------------

def test_junit_one_testcase_per_kernel_and_check():
    data = verify_report()
    root = ET.fromstring(junit.render(data, None))
    assert root.tag == "testsuites"
    cases = root.findall("./testsuite/testcase")
    checks = {r["check"] for r in data["cases"]}
    assert sorted((c.get("classname"), c.get("name")) for c in cases) == sorted(
        (f"verify.rmsnorm.{k}", check) for k in (GOOD, BAD) for check in checks)
    failed = [c for c in cases if c.find("failure") is not None]
    assert [(c.get("classname"), c.get("name")) for c in failed] == [(f"verify.rmsnorm.{BAD}", "dgamma")]
    text = failed[0].find("failure").text
    first = next(r for r in data["cases"] if not r["passed"])
    assert first["repro"] in text and first["case_id"] in text
    assert "\x07" not in text  # XML 1.0 forbids it; a CI parser would reject the file
    assert root.get("tests") == str(len(cases)) and root.get("failures") == "1"


def test_junit_counts_add_up_with_mutation():
    root = ET.fromstring(junit.render(verify_report(), mutation_report()))
    suites = root.findall("testsuite")
    assert sum(int(s.get("tests")) for s in suites) == int(root.get("tests"))
    mutation = next(s for s in suites if s.get("name") == "mutation")
    by_name = {c.get("name"): c for c in mutation.findall("testcase")}
    assert by_name["gen_mask_lt_le_1"].find("failure") is not None
    assert by_name["gen_const_3"].find("skipped") is not None
    assert by_name["divide_by_block"].find("failure") is None
    assert by_name["score"].find("failure") is not None  # 0.667 < min 1.0


# --- summary.md -------------------------------------------------------------------------

def test_summary_md_is_short_and_names_the_verdicts():
    data = verify_report(n_cases=400)
    text = summary_md.render(data, None)
    assert "**FAIL**" in text and f"`{BAD}`" in text and f"`{GOOD}`" in text
    assert "mutation testing: not run" in text
    assert next(r for r in data["cases"] if not r["passed"])["repro"] in text
    assert len(text.splitlines()) < 60


def test_summary_md_lists_survivors():
    text = summary_md.render(verify_report(), mutation_report())
    assert "score **0.6667**" in text and "gen_mask_lt_le_1" in text


# --- python -m harness report -----------------------------------------------------------

def test_report_command_writes_three_files(report_dir, capsys):
    assert main(["report", "--report-dir", str(report_dir)]) == 0
    for name in ("index.html", "junit.xml", "summary.md"):
        assert (report_dir / name).stat().st_size > 0
    ET.parse(report_dir / "junit.xml")


def test_report_command_without_json_exits_2_with_one_line(tmp_path, capsys):
    assert main(["report", "--report-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no verify.json or mutation.json" in err


def test_report_command_with_broken_json_exits_2(tmp_path, capsys):
    (tmp_path / "verify.json").write_text('{"backend": ')
    assert main(["report", "--report-dir", str(tmp_path)]) == 2
    assert "cannot be read as JSON" in capsys.readouterr().err


def test_rendering_failure_after_verify_warns_and_keeps_going(report_dir, monkeypatch, capsys):
    """Targets: a renderer bug turning into a traceback that hides verify's verdict."""
    def broken(*args, **kwargs):
        raise RuntimeError("template bug")

    monkeypatch.setattr(html, "render", broken)
    assert report_cli.write_after_run(report_dir) is False
    err = capsys.readouterr().err
    assert "warning:" in err and "template bug" in err and "python -m harness report" in err


def test_report_reads_records_only():
    """Reports never import kernels or oracles (ARCHITECTURE.md: independence)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for path in ("harness/cli/report.py", "reports/html.py", "reports/junit.py", "reports/summary_md.py", "reports/plots.py"):
        tree = ast.parse((root / path).read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not {n for n in names if n.split(".")[0] in ("kernels", "oracles", "torch", "triton")}, path


def test_minimal_documented_fields_are_enough(tmp_path):
    """Targets: renderers that depend on extension fields an outside tool's verify.json lacks
    (verify_report.py documents only these)."""
    case_keys = ("op", "kernel", "check", "case_id", "shape", "dtype", "layout", "max_abs_err", "max_rel_err",
                 "atol", "rtol", "mismatched", "worst_index", "passed", "repro")
    full = verify_report()
    minimal = {
        "backend": "interpreter", "versions": {}, "seed": 0,
        "kernels": [{k: kern[k] for k in ("op", "name", "passed", "cases", "failed")} for kern in full["kernels"]],
        "cases": [{k: r[k] for k in case_keys} for r in full["cases"]],
    }
    (tmp_path / "verify.json").write_text(json.dumps(minimal))
    report_cli.write_all(tmp_path)
    page = (tmp_path / "index.html").read_text()
    assert BAD in page and "FAIL" in page
    assert ET.parse(tmp_path / "junit.xml").getroot().get("failures") == "1"


def test_an_interrupted_campaign_shows_what_finished_and_what_did_not_run():
    report = dict(mutation_report(), interrupted=True, passed=False, not_run=["gen.never_started.1"],
                  refused="interrupted after 3 of 4 mutants: the score covers only those and is not a verdict")
    page = html.render(None, report)
    assert "INTERRUPTED" in page and "gen.never_started.1" in page
    assert "mask = cols &lt;= N" in page  # the finished mutants are still listed
    md = summary_md.render(None, report)
    assert "INTERRUPTED" in md and "REFUSED" not in md


def test_where_the_time_went_comes_from_the_reports_and_skips_what_they_lack():
    from reports import timing

    verify = {**verify_report(), "seconds": 49.2}
    phases = [{"compile_s": 3.0, "kernel_s": 20.0, "oracle_s": 2.0, "checks_s": 4.5},
              {"compile_s": 1.5, "kernel_s": 17.0, "oracle_s": 1.0, "checks_s": 6.0}]
    verify["kernels"] = [{**k, "time_breakdown": t} for k, t in zip(verify["kernels"], phases)]
    assert len(verify["kernels"]) == 2
    mutation = {**mutation_report(), "seconds": 107.2, "sanity": {"clean_seconds": {"a": 17.7, "b": 14.8}},
                "memcheck": {"checked": 21, "killed": 18, "seconds": 35.0},
                "memcheck_first": {"looked": 18, "killed": 17, "seconds": 22.4},
                "workers": {"count": 16, "reuse": True, "mutants_per_gpu": {"0": 190, "1": 189}}}
    rows = timing.rows(verify, mutation, {"train-check": {"passed": True, "seconds": 6.3}})
    assert [r["step"] for r in rows] == ["verify", "train-check", "mutation"]
    assert rows[0]["seconds"] == 49.2 and rows[0]["detail"].startswith("Triton compilation 4.5 s, kernel calls 37.0 s, oracle 3.0 s, checks 10.5 s")
    assert rows[2]["detail"] == ("sanity (slowest clean run) 17.7 s; memcheck first look 22.4 s beside the pool "
                                 "(17 of 18 killed); memcheck second look 35.0 s (21 survivors); "
                                 "16 workers, mutants per GPU 0: 190, 1: 189")
    md = summary_md.render(verify, mutation, {"train-check": {"passed": True, "seconds": 6.3}})
    assert "| verify | 49.2 | Triton compilation 4.5 s" in md and "| train-check | 6.3 | - |" in md
    assert 'id="timing-table"' in html.render(verify, mutation)
    # an older report without any timing: the rows say "-" rather than invent a figure
    untimed = {"op": "rmsnorm", "name": "k", "passed": True, "cases": 1, "failed": 0}  # no time_breakdown, no seconds
    bare = timing.rows({"kernels": [untimed]}, {})
    assert bare == [{"step": "verify", "seconds": None, "detail": ""}, {"step": "mutation", "seconds": None, "detail": ""}]


def test_bench_goals_show_met_or_the_gap_and_what_limits_them():
    # where a goal is not met, the report shows the gap and what limits it
    missed = {"workload": "w", "mode": "forward+backward", "met": False, "limited_by": "bytes: dW rewritten per chunk",
              "text": "target w forward+backward: k (project) 139.0 us against <= 80.0 us: NOT met, 1.74x the target"}
    met = {"workload": "w", "mode": "forward", "met": True, "text": "target w forward: k (project) 1.0 us against <= 2.0 us: met"}
    old = {"workload": "w", "mode": "forward", "time_met": True}  # a bench report without the goal's text (an older writer)
    bench = {"device": "H200", "command": "python -m harness bench --op x", "results": [], "targets": [missed, met, old]}
    md = summary_md.render(verify_report(), None, {"bench x": bench})
    assert "### bench x: goals" in md
    assert "- **not met**: target w forward+backward: k (project) 139.0 us" in md and "limited by: bytes: dW rewritten" in md
    assert "- met: target w forward: k (project) 1.0 us against <= 2.0 us: met" in md
    assert sum(line.startswith(("- met", "- **not met**")) for line in md.splitlines()) == 2  # the old one is left out
    page = html.render(verify_report(), None, {"bench x": bench})
    assert ">not met</span> target w forward+backward" in page and "limited by: bytes: dW rewritten per chunk" in page
    assert ">met</span> target w forward: k (project)" in page
