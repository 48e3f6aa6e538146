"""``python -m harness mutate`` end to end: crash and hang isolation, report fields, exit codes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from watched import Watched

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "tests/fixtures/mutation_plugin.py"
SMALL = "rmsnorm:M=3,N=33,dtype=float32,layout=col_sliced,values=normal,eps=1e-06,seed=5"


def mutate(*args, timeout=240):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "harness", "mutate", "--backend", "interpreter", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_segfault_abort_and_hang_do_not_stop_the_campaign(tmp_path):
    # bug classes: a mutant that kills its process (SIGSEGV, SIGABRT) or never returns
    proc = mutate("--plugin", PLUGIN, "--select", "plugin.*", "--case", SMALL, "--timeout", "30",
                  "--jobs", "2", "--report-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "mutation.json").read_text())
    status = {m["name"]: m["status"] for m in report["mutants"]}
    assert status == {"plugin.segfaults": "crashed", "plugin.aborts": "crashed", "plugin.hangs": "timeout",
                      "plugin.scaled": "killed"}
    assert report["score"] == 1.0 and report["sanity"]["passed"] and report["backend"] == "interpreter"
    assert "versions" in report and report["counts"]["crashed"] == 2
    for m in report["mutants"]:
        assert m["detected"] is True and m["origin"] == "plugin"
        assert set(m) >= {"op", "name", "origin", "operator", "location", "diff", "status", "detected", "killed_by", "seconds"}
    scaled = next(m for m in report["mutants"] if m["name"] == "plugin.scaled")
    assert scaled["killed_by"]["check"] == "forward" and scaled["killed_by"]["case_id"] == SMALL
    assert report["kill_matrix"]["plugin.scaled"] == {"forward": SMALL}
    assert [c["case_id"] for c in report["minimal_cases"]] == [SMALL]
    assert "score 1.0000" in proc.stdout


@pytest.mark.slow
def test_bad_usage_exits_2(tmp_path):
    proc = mutate("--min-score", "1.5", "--report-dir", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and "fraction between 0 and 1" in proc.stderr
    proc = mutate("--select", "no.such.mutant*", "--report-dir", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and "matches no mutant" in proc.stderr
    assert not (tmp_path / "mutation.json").exists()


@pytest.mark.slow
def test_sigterm_writes_a_partial_report_and_leaves_no_worker_behind(tmp_path):
    # a CI time limit sends SIGTERM: what finished is kept, the rest is listed as not run, exit 130
    import signal
    import time

    tag = f"harness-sigterm-test-{os.getpid()}-{time.time_ns()}"
    env = dict(os.environ, HARNESS_TEST_TAG=tag)  # inherited by the workers: lets the test find them
    run = Watched([sys.executable, "-m", "harness", "mutate", "--backend", "interpreter", "--plugin", PLUGIN,
                   "--select", "plugin.*", "--case", SMALL, "--timeout", "600", "--jobs", "2",
                   "--report-dir", str(tmp_path)], cwd=ROOT, env=env)
    # SIGTERM while the pool runs: 20 s after its "[mutate] N job(s)" line the sanity step and the quick
    # mutants are mostly done (how many depends on the load: see below), plugin.hangs is not
    run.wait_for(lambda: run.printed("[mutate]"), timeout=240, what="the campaign's pool")
    time.sleep(20)
    run.proc.send_signal(signal.SIGTERM)
    out = run.finish(timeout=60)
    assert run.proc.returncode == 130, out
    report = json.loads((tmp_path / "mutation.json").read_text())
    assert report["interrupted"] is True and report["passed"] is False
    assert "plugin.hangs" in report["not_run"]
    assert "interrupted after" in report["refused"]
    assert "INTERRUPTED" in out
    # the next run resumes: the sanity step and the final outcomes (kills) are in the store; the
    # crashes are load-dependent and rerun, and no survivor is kept without its second looks
    saved = [json.loads(p.read_text()) for p in (tmp_path / "incremental").glob("[!.]*.json")]
    statuses = sorted(s["payload"]["status"] for s in saved if "status" in s["payload"])
    passed = bool(report["sanity"]["passed"])  # under load SIGTERM may come before the sanity step ends
    final = sorted(m["status"] for m in report["mutants"] if m["status"] in ("killed", "incompetent"))
    assert statuses == (final if passed else []), (statuses, report["mutants"])  # what finished depends on the load
    assert any("clean_seconds" in s["payload"] for s in saved) == passed, report["sanity"]
    left = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if tag.encode() in environ.read_bytes():
                left.append(environ.parent.name)
        except OSError:
            pass
    assert left == [], f"worker processes left running: {left}"


def test_progress_counts_every_job_when_an_op_has_several_kernels(tmp_path):
    # fused_linear_cross_entropy has two project kernels: two clean runs and two forced failures
    # (bug class: a count of finished jobs above the total, such as 385/384)
    import re

    case = ("fused_linear_cross_entropy:N=17,D=33,V=63,dtype=float32,layout=offset,values=tiny,ignored=some,"
            "ignore_index=62,seed=2003")
    proc = mutate("--op", "fused_linear_cross_entropy", "--select", "cat.hybrid_dw_not_averaged", "--case", case,
                  "--jobs", "2", "--report-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    counts = [tuple(map(int, m.groups())) for m in re.finditer(r"\[mutate\] (\d+)/(\d+) ", proc.stdout + proc.stderr)]
    assert counts and {total for _, total in counts} == {5} and max(done for done, _ in counts) == 5


@pytest.mark.slow
def test_a_mutant_waits_for_its_first_look_while_the_pool_runs_the_others():
    # real workers on the interpreter: a look still running keeps its mutant queued (undecided),
    # the pool runs the rest; once the look ends its kill stands for the mutant's run
    from harness.mutation import campaign
    from harness.mutation.campaign import Outcome, Status
    from harness.mutation.session import CampaignPlan, CampaignSession

    modules = campaign.load_mutants()
    entries = campaign.select("rmsnorm", "cat.*")[:3]
    looked, clean = entries[0], entries[1]

    class SlowLooks:
        polls = 0

        def __contains__(self, name):  # by <op>/<name> (harness.mutation.outcome.ident)
            return name in (f"{looked.op}/{looked.name}", f"{clean.op}/{clean.name}")

        def done(self, name):
            self.polls += 1
            return self.polls > 20  # about a second of polling

        def outcome(self, name):
            if name != f"{looked.op}/{looked.name}":
                return None
            return Outcome(looked, Status.KILLED, {"check": "memcheck", "case_id": SMALL, "repro": "r"}, 3.0)

        def close(self, *, interrupted=False):
            self.closed = interrupted

    looks = SlowLooks()
    plan = CampaignPlan(tuple(entries), "interpreter", seed=0, max_examples=0, parallel=2, modules=modules, case=SMALL)
    check, outcomes = CampaignSession(plan, first_looks=looks).run()
    assert check.passed, check.reason
    by_name = {o.entry.name: o for o in outcomes}
    assert by_name[looked.name].killed_by["check"] == "memcheck" and by_name[looked.name].seconds == 3.0
    assert by_name[clean.name].killed_by is None or by_name[clean.name].killed_by["check"] != "memcheck"
    assert by_name[clean.name].seconds > 0  # it ran its suite
    assert looks.polls > 20 and looks.closed is False


@pytest.mark.slow
def test_a_cpu_campaign_keeps_the_gpus_memcheck_kills_in_the_kill_cache(tmp_path):
    # one report dir for both backends: the interpreter has no memcheck, so it must not forget them
    cache = tmp_path / "kill_cache.json"
    cache.write_text(json.dumps({"format": 1, "backends": {}, "memcheck": {"plugin.scaled": SMALL, "gen.x": SMALL}}))
    proc = mutate("--plugin", PLUGIN, "--select", "plugin.scaled", "--case", SMALL, "--jobs", "2",
                  "--report-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kept = json.loads(cache.read_text())
    assert kept["memcheck"] == {"plugin.scaled": SMALL, "gen.x": SMALL}
    assert kept["backends"]["interpreter"] == {"plugin.scaled": SMALL}


def test_mutate_says_how_long_first_and_renders_index_html(tmp_path):
    # bug class: a 15-minute campaign that says nothing of its length up front and leaves no page
    proc = mutate("--plugin", PLUGIN, "--select", "plugin.scaled", "--case", SMALL, "--jobs", "1",
                  "--report-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    first = next(line for line in proc.stdout.splitlines() if line.startswith("mutate: 1 mutant(s) over 1 worker(s)"))
    assert proc.stdout.index(first) < proc.stdout.index("score")
    assert (tmp_path / "index.html").is_file() and (tmp_path / "summary.md").is_file()
    assert "plugin.scaled" in (tmp_path / "index.html").read_text()


def test_the_estimate_is_the_mutant_count_times_the_cost_of_a_case(tmp_path):
    from types import SimpleNamespace

    from harness.mutation.estimate import describe, estimate

    (tmp_path / "verify.json").write_text(json.dumps({"backend": "interpreter", "kernels": [
        {"op": "myop", "name": "k", "worker_seconds": 100.0}]}))
    mutants = [SimpleNamespace(op="myop") for _ in range(10)]
    figure = estimate(mutants, [], parallel=2, report_dir=tmp_path, backend="interpreter", cases_of=lambda op: 50)
    # 2 s a case: a killed mutant about 2 cases (4 s), a survivor the 100 s suite; over 2 workers
    assert (figure["low_s"], figure["high_s"]) == (20.0, 500.0)
    assert "expected 20 s" in describe(figure) and "to 8 min" in describe(figure)
    other = estimate([SimpleNamespace(op="newop")], [], parallel=1, report_dir=tmp_path, backend="interpreter",
                     cases_of=lambda op: 50)
    assert other["unknown"] == ["newop"] and "no cost figure for newop" in describe(other)


ONE_MUTANT = "tests/fixtures/one_mutant_plugin.py"
SELECTED = """
import json, sys
from harness.cli import build_parser, common
from harness.mutation import campaign, setup
args = build_parser().parse_args(["mutate", "--backend", "interpreter", *sys.argv[1:]])
backend = common.prepare(args)
campaign.load_mutants()
entries, unobservable = setup.selected(args, backend)
print(json.dumps(sorted({e.origin.value for e in entries + unobservable})), len(entries + unobservable))
"""


def selected(*args):
    proc = subprocess.run([sys.executable, "-c", SELECTED, *args], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    origins, count = proc.stdout.strip().splitlines()[-1].rsplit(" ", 1)
    return json.loads(origins), int(count)


def test_plugin_alone_mutates_the_plugins_mutants_only(tmp_path):
    # bug class: `mutate --plugin FILE` that also runs the project's ~1,800 mutants (a 15-minute wait
    # for a user who meant their own kernel's)
    proc = mutate("--plugin", ONE_MUTANT, "--case", SMALL, "--jobs", "1", "--report-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "mutation.json").read_text())
    assert [(m["name"], m["origin"], m["status"]) for m in report["mutants"]] == [
        ("plugin.one_percent_large", "plugin", "killed")]
    assert any(line.startswith("mutate: 1 mutant(s) over 1 worker(s)") for line in proc.stdout.splitlines()), proc.stdout
    # --with-project brings the project's mutants back; --plugin alone keeps to the plugin's
    assert selected("--plugin", ONE_MUTANT, "--op", "rmsnorm") == (["plugin"], 1)
    origins, count = selected("--plugin", ONE_MUTANT, "--op", "rmsnorm", "--with-project")
    assert set(origins) == {"plugin", "catalog", "generated"} and count > 10
    assert selected("--op", "rmsnorm")[1] == count - 1  # without --plugin: the project's, as before


def test_plugin_alone_that_registers_no_mutant_is_bad_usage(tmp_path):
    proc = mutate("--plugin", "examples/plugins/quickstart_rmsnorm.py", "--report-dir", str(tmp_path), timeout=120)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "registers no mutant; add --with-project to mutate the project's mutants" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "mutation.json").exists()
