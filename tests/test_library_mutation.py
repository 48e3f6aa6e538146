"""Library mutation (``mutate --mutate-module MODULE --plugin FILE [--tests COMMAND]``) on the
stand-in library of tests/fixtures/stand_in_lib, through the interpreter.

Bug classes: a mutant that never reaches the code that runs (a name imported elsewhere keeps
the original), a swap that outlives its mutant (the next mutant, or the clean run, runs a
mutated library), a library's tests scored against an unmutated library (the swap missing in
their processes, or in the processes they start), a stale equivalence mark hiding a mutant of
changed code, and the 2x2 of harness and tests mis-counted."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.errors import UsageError
from harness.mutation import campaign, equivalence, library, library_tests, swap
from harness.registry import loader
from harness.registry.registry import REGISTRY
from watched import Watched
from harness.cases.command import console_words

CLI = " ".join(console_words())  # the console script that starts every repro line

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
PLUGIN = str(FIXTURES / "stand_in_plugin.py")
LIB_TESTS = FIXTURES / "stand_in_lib_tests"
WEAK_TESTS = f"cd {LIB_TESTS} && {sys.executable} -m pytest -q check_stand_in_lib.py"
FWD = "gen.stand_in_lib.rms_norm._rms_norm_fwd"
BWD = "gen.stand_in_lib.rms_norm._rms_norm_bwd"
# one row of 33 columns: N is not the block (64), and with a single row a lost row offset is invisible
CASE = "rmsnorm:M=1,N=33,dtype=float32,layout=contiguous,values=normal,eps=1e-06,seed=1"


@pytest.fixture(scope="module")
def stand_in():
    """The stand-in's plugin kernels and library mutants in this process, for this module only."""
    sys.path.insert(0, str(FIXTURES))
    saved, plugins = dict(REGISTRY.entries), set(sys.modules)
    loader.load_plugin(PLUGIN)
    targets = library.register(("stand_in_lib.rms_norm", "stand_in_lib.utils", "stand_in_lib.swiglu"))
    yield {e.name: e for e in library.mutants_of(campaign.select(None, "*"))}, targets
    REGISTRY.entries.clear()
    REGISTRY.entries.update(saved)
    for name in set(sys.modules) - plugins:
        if name.startswith("plugin_stand_in_plugin"):
            del sys.modules[name]
    sys.path.remove(str(FIXTURES))


def _digests() -> dict[str, str]:
    return {p.name: hashlib.sha1(p.read_bytes()).hexdigest() for p in (FIXTURES / "stand_in_lib").glob("*.py")}


def test_names_carriers_and_fingerprints(stand_in):
    mutants, targets = stand_in
    e = mutants[f"{FWD}.constant_perturb.1"]
    assert e.op == "rmsnorm" and e.origin == "library" and e.meta["kernel"] == "stand_in_rmsnorm"
    assert e.meta["module"] == "stand_in_lib.rms_norm" and e.meta["function"] == "_rms_norm_fwd"
    assert e.meta["fingerprint"] == hashlib.sha1(e.fn.source.encode()).hexdigest()[:12]
    assert "2.0 / tl.sqrt" in e.fn.source and e.fn.source.startswith("@triton.jit")
    # sigmoid lives in utils, which rms_norm also imports from: the kernel that binds it carries it
    by_module = {t.module: t for t in targets}
    assert by_module["stand_in_lib.utils"].carriers["sigmoid"].name == "stand_in_swiglu"
    assert {m.split(".")[2] for m in by_module["stand_in_lib.rms_norm"].mutants} == {"rms_norm"}
    assert REGISTRY.get("swiglu", campaign.SANITY_PREFIX + "stand_in_swiglu").origin == "sanity"


def test_the_swap_reaches_every_binding_and_is_undone(stand_in):
    # bug class: `from .utils import sigmoid` in swiglu keeps the original unless it is rebound too
    mutants, _ = stand_in
    utils, user = sys.modules["stand_in_lib.utils"], sys.modules["stand_in_lib.swiglu"]
    original, before = utils.sigmoid, _digests()
    mutant = mutants["gen.stand_in_lib.utils.sigmoid.add_sub_swap.1"].fn
    a, b = torch.randn(3, 40), torch.randn(3, 40)
    try:
        y = mutant(a, b)
        assert utils.sigmoid is not original and user.sigmoid is utils.sigmoid
        assert {"stand_in_lib.utils.sigmoid", "stand_in_lib.swiglu.sigmoid"} <= set(mutant._swap.places())
        assert not torch.allclose(y, torch.nn.functional.silu(a) * b)  # the carrier ran the mutant
    finally:
        mutant.release()
    assert utils.sigmoid is original and user.sigmoid is original and "run" not in vars(original)
    assert torch.allclose(REGISTRY.get("swiglu", "stand_in_swiglu").fn(a, b), torch.nn.functional.silu(a) * b, atol=1e-6)
    assert _digests() == before  # nothing on disk changed


def test_a_mutant_triton_refuses_is_incompetent(stand_in):
    mutants, _ = stand_in
    mutant = mutants[f"{FWD}.reduction_axis_swap.1"].fn  # axis=1 of a 1-D block: the front end refuses
    try:
        with pytest.raises(Exception):
            mutant(torch.randn(2, 8), torch.ones(8), 1e-6)
    finally:
        mutant.release()
    assert mutant.incompetent and "axis" in mutant.incompetent


def test_the_bootstrap_installs_the_mutant_in_the_commands_processes_and_theirs(stand_in, tmp_path):
    # bug class: a test run (or an xdist worker it starts) that imports the unmutated library
    mutants, _ = stand_in
    spec = mutants["gen.stand_in_lib.utils.sigmoid.add_sub_swap.1"].fn.spec()
    (tmp_path / "probe.py").write_text(
        "import inspect, sys\nimport stand_in_lib.swiglu\n"
        "source = inspect.getsource(sys.modules['stand_in_lib.swiglu'].sigmoid.fn)\n"
        "print('MUTANT' if '1.0 - tl.exp' in source else 'ORIGINAL')\n")
    (tmp_path / "spawn.py").write_text(  # a process the command starts, as pytest-xdist starts its workers
        "import subprocess, sys\nsubprocess.run([sys.executable, sys.argv[1]], check=True)\n")
    child = f"{sys.executable} {tmp_path / 'probe.py'}"
    grandchild = f"{sys.executable} {tmp_path / 'spawn.py'} {tmp_path / 'probe.py'}"
    boot = library_tests.Bootstrap()
    try:
        base = dict(os.environ, PYTHONPATH=str(FIXTURES))
        for command in (child, grandchild):
            mutated = library_tests.run_command(command, boot.env(spec, base, interpreter=True), str(ROOT), 120)
            clean = library_tests.run_command(command, boot.env(None, base, interpreter=True), str(ROOT), 120)
            assert mutated.passed and mutated.tail.strip().endswith("MUTANT"), mutated.tail
            assert clean.passed and clean.tail.strip().endswith("ORIGINAL"), clean.tail
    finally:
        boot.close()


def test_a_hang_is_killed_and_counts_as_detected(tmp_path):
    run = library_tests.run_command(f"{sys.executable} -c 'import time; time.sleep(60)'", dict(os.environ), str(tmp_path), 1)
    assert run.timed_out and run.detected and run.exit_status is None


def test_the_sample_is_deterministic_and_keeps_the_order():
    names = [f"gen.m.f.op.{i}" for i in range(20)]
    chosen = library_tests.sample(names, 5)
    assert len(chosen) == 5 and chosen == library_tests.sample(list(names), 5)
    assert chosen == [n for n in names if n in chosen] and library_tests.sample(names, None) == names


def test_equivalence_marks_need_a_fingerprint_and_a_reason(tmp_path):
    path = tmp_path / "marks.toml"
    path.write_text('[[equivalent]]\nname = "gen.a"\nreason = "same function"\n')
    with pytest.raises(UsageError, match="lacks fingerprint"):
        equivalence.load(path)
    path = tmp_path / "marks.json"
    path.write_text(json.dumps({"equivalent": [{"name": "gen.a", "fingerprint": "f1", "reason": "same"}]}))
    assert equivalence.load(path)["gen.a"]["fingerprint"] == "f1"
    with pytest.raises(UsageError, match="cannot read"):
        equivalence.load(tmp_path / "missing.toml")


def _mutate(tmp_path: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(FIXTURES))
    return subprocess.run([sys.executable, "-m", "harness", "mutate", "--plugin", PLUGIN, "--backend", "interpreter",
                           "--report-dir", str(tmp_path / "out"), *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_a_bad_module_name_is_one_line_and_exit_2(tmp_path):
    got = _mutate(tmp_path, "--mutate-module", "stand_in_lib.no_such_module")
    assert got.returncode == 2 and "Traceback" not in got.stderr
    assert got.stderr.count("\n") == 1 and "stand_in_lib.no_such_module" in got.stderr and "cannot be imported" in got.stderr


def test_tests_that_fail_on_the_unmutated_library_are_refused_with_their_output(tmp_path):
    failing = f"{sys.executable} -c \"print('the clean run broke'); raise SystemExit(3)\""
    got = _mutate(tmp_path, "--mutate-module", "stand_in_lib.utils", "--tests", failing)
    assert got.returncode == 2 and "the clean run broke" in got.stderr and "exit status 3" in got.stderr
    assert not (tmp_path / "out" / "mutation.json").exists()  # refused before any mutant ran


@pytest.mark.slow
def test_library_campaign_scores_the_harness_and_the_tests_side_by_side(tmp_path, stand_in):
    mutants, _ = stand_in
    marked, stale = f"{FWD}.other_zero_to_one.2", f"{BWD}.other_zero_to_one.3"
    marks = tmp_path / "equivalent.toml"
    marks.write_text(
        f'[[equivalent]]\nname = "{marked}"\nfingerprint = "{mutants[marked].meta["fingerprint"]}"\n'
        'reason = "a padding lane of w reads 1, but it only meets x * rstd of a masked lane, never stored"\n'
        f'[[equivalent]]\nname = "{stale}"\nfingerprint = "000000000000"\nreason = "judged on an older source"\n')
    chosen = [f"{FWD}.constant_perturb.1",  # the weak tests and the harness both see a doubled output
              f"{FWD}.size_block_swap.3",  # divides by BLOCK: the tests' N is a power of two
              f"{FWD}.mul_div_swap.6",  # divides by w: the tests' weights are ones
              f"{FWD}.drop_offset_term.1",  # reads row 0 for every row: the harness case has one row
              f"{BWD}.add_sub_swap.6",  # rstd of row -row: one row, and the tests skip the backward
              f"{FWD}.reduction_axis_swap.1",  # does not compile
              marked, stale]
    got = _mutate(tmp_path, "--mutate-module", "stand_in_lib.rms_norm", "--op", "rmsnorm", "--case", CASE,
                  "--select", ",".join(chosen), "--jobs", "2", "--min-score", "0", "--equivalent", str(marks),
                  "--tests", WEAK_TESTS)
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "mutation.json").read_text())
    by_name = {m["name"]: m for m in report["mutants"]}
    status = {n: m["status"] for n, m in by_name.items()}
    assert status[f"{FWD}.reduction_axis_swap.1"] == "incompetent" and status[marked] == "equivalent"
    assert status[f"{FWD}.drop_offset_term.1"] == status[f"{BWD}.add_sub_swap.6"] == status[stale] == "survived"
    assert {status[n] for n in chosen[:3]} == {"killed"}
    tests = {n: m["killed_by_tests"] for n, m in by_name.items()}
    assert tests[f"{FWD}.constant_perturb.1"] is tests[f"{FWD}.drop_offset_term.1"] is True
    assert tests[f"{FWD}.size_block_swap.3"] is tests[f"{FWD}.mul_div_swap.6"] is tests[f"{BWD}.add_sub_swap.6"] is False
    assert tests[f"{FWD}.reduction_axis_swap.1"] is None and tests[marked] is None  # not scorable: not run
    assert all(m["module"] == "stand_in_lib.rms_norm" and (m["tests_seconds"] is None) == (m["killed_by_tests"] is None)
               for m in report["mutants"])
    assert report["tests"]["command"] == WEAK_TESTS and report["tests"]["run"] == 6
    assert (report["tests"]["killed"], report["tests"]["survived"]) == (2, 4) and report["tests"]["score"] == pytest.approx(1 / 3)
    row = report["by_module"]["stand_in_lib.rms_norm"]
    assert (row["both"], row["harness_only"], row["tests_only"], row["neither"]) == (1, 2, 1, 2)
    assert row["harness_score"] == pytest.approx(3 / 6) and row["tests_score"] == pytest.approx(2 / 6)
    assert report["stale_equivalent_marks"] == [stale]
    assert report["library"]["carriers"][f"stand_in_lib.rms_norm._rms_norm_fwd"]["kernel"] == "stand_in_rmsnorm"
    repro = by_name[f"{FWD}.size_block_swap.3"]["killed_by"]["repro"]
    assert repro.startswith(f"{CLI} mutate ") and "--mutate-module stand_in_lib.rms_norm" in repro
    assert "TESTS MISS, HARNESS KILLS " + f"{FWD}.size_block_swap.3" in got.stdout
    assert "/ BLOCK" in got.stdout and "TESTS ONLY (a gap of the harness) " + f"{FWD}.drop_offset_term.1" in got.stdout
    # the HTML and the Markdown summary show the same 2x2 and the missed mutants' repros
    rendered = subprocess.run([sys.executable, "-m", "harness", "report", "--report-dir", str(tmp_path / "out")],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rendered.returncode in (0, 1), rendered.stderr
    html = (tmp_path / "out" / "index.html").read_text()
    assert 'id="library-2x2"' in html and f"{FWD}.size_block_swap.3" in html and "--mutate-module" in html
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "| `stand_in_lib.rms_norm` | 8 |" in summary and "tests miss, harness kills" in summary


def test_the_2x2_counts_only_the_mutants_both_judges_ran():
    from reports import library_tests as lt

    def m(status, tests, module="lib.a"):
        return {"module": module, "status": status, "detected": status in ("killed", "timeout", "crashed"),
                "killed_by_tests": tests}

    mutants = [m("killed", True), m("timeout", False), m("survived", True), m("survived", False), m("killed", None),
               m("incompetent", None), m("equivalent", None), m("crashed", True, "lib.b")]
    rows = lt.by_module(mutants)
    a = rows["lib.a"]
    assert (a["both"], a["harness_only"], a["tests_only"], a["neither"]) == (1, 1, 1, 1)
    assert a["mutants"] == 7 and a["harness_score"] == 3 / 5 and a["tests_score"] == 2 / 4
    assert rows["lib.b"]["both"] == 1 and [x["status"] for x in lt.tests_missed(mutants)] == ["timeout"]


def test_merged_parts_add_their_tests_counts():
    from reports import library_tests as lt

    part = {"command": "c", "score": 1.0, "killed": 2, "survived": 0, "run": 2, "sample": None}
    sampled = {"command": "c", "score": 0.0, "killed": 0, "survived": 3, "run": 3,
               "sample": {"size": 3, "of": 5, "mutants": ["x", "y", "z"]}}
    merged = lt.merge([part, sampled])
    assert (merged["killed"], merged["survived"], merged["run"], merged["score"]) == (2, 3, 5, 0.4)
    assert merged["sample"] == {"size": 3, "of": 7, "mutants": ["x", "y", "z"]} and lt.merge([None]) is None


def test_a_clean_run_that_fails_late_stops_the_campaign_beside_it(tmp_path):
    """The clean run goes beside the harness's own pass; when it fails, the campaign stops at its
    next event and exits 2 with the run's output, scoring nothing and writing no report."""
    failing = f"{sys.executable} -c \"import time; time.sleep(3); print('broke late'); raise SystemExit(4)\""
    got = _mutate(tmp_path, "--mutate-module", "stand_in_lib.rms_norm", "--tests", failing)
    assert got.returncode == 2 and "broke late" in got.stderr and "exit status 4" in got.stderr, got.stderr[-2000:]
    assert "beside the campaign" in got.stdout
    assert "score" not in got.stdout.split("beside the campaign")[-1].lower()  # never reached a score
    assert not (tmp_path / "out" / "mutation.json").exists()


def test_an_interrupted_library_campaign_kills_its_clean_run(tmp_path):
    """SIGTERM while the clean run still runs beside the campaign: the campaign ends as an
    interruption (exit 130, partial report) without waiting for it, and no test process is left."""
    import signal
    import time

    tag = f"clean-run-{os.getpid()}-{time.time_ns()}"
    slow = f"{sys.executable} -c \"import time; time.sleep(300)\" {tag}"
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(FIXTURES))
    run = Watched([sys.executable, "-m", "harness", "mutate", "--plugin", PLUGIN, "--backend", "interpreter",
                   "--report-dir", str(tmp_path / "out"), "--mutate-module", "stand_in_lib.rms_norm", "--tests", slow],
                  cwd=ROOT, env=env)
    # the harness's own command line holds the tag too (in --tests): match the clean run's python only
    clean_run = ["pgrep", "-f", f"^{re.escape(sys.executable)} -c import time; time.sleep\\(300\\) {tag}$"]
    # SIGTERM once the pool has started (its "[mutate] N job(s)" line) and the clean run is alive
    run.wait_for(lambda: run.printed("[mutate]") and subprocess.run(clean_run, capture_output=True).returncode == 0,
                 timeout=240, what="the campaign's pool beside the clean run")
    run.proc.send_signal(signal.SIGTERM)
    out = run.finish(timeout=90)
    assert run.proc.returncode == 130, out[-2000:]
    time.sleep(1)
    assert subprocess.run(clean_run, capture_output=True).returncode != 0, "the clean run outlived the campaign"
    assert json.loads((tmp_path / "out" / "mutation.json").read_text())["interrupted"] is True


def test_tests_stopped_beside_the_second_look_count_no_kill(tmp_path):
    """The tests against the mutants run beside the memcheck second look; an interruption there
    stops them: the runs it cut short (killed, so a non-zero exit) are dropped, never counted as
    kills, and the scoring says it did not finish."""
    import time
    import types

    from harness.mutation.library_tests import Scoring
    from vocabulary import Status

    def outcome(name):
        fn = types.SimpleNamespace(spec=lambda: {"mutant": name})
        return types.SimpleNamespace(entry=types.SimpleNamespace(name=name, fn=fn),
                                     status=Status.SURVIVED)

    slow = f"{sys.executable} -c \"import time; time.sleep(120)\""
    tests = Scoring(slow, cwd=str(tmp_path), jobs=2, sample_size=None, interpreter=True, timeout=300.0,
                    factor=5.0, margin=60.0)
    tests.start_mutants([outcome(f"gen.m{i}") for i in range(4)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(tests._mutant_running) < 2:
        time.sleep(0.1)
    started = time.monotonic()
    tests.stop_mutants()
    assert time.monotonic() - started < 30
    assert tests.runs == {} and tests.summary()["run"] == 0
    assert tests.wait_mutants() is False
