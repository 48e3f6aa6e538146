"""In a CI log (not a terminal), mutate prints periodic counts and the failures in full, not a line per mutant."""

import io

from harness.execution import progress as progress_mod
from harness.execution.jobs import Event, Job


def _done(name: str, failed: int) -> Event:
    return Event(job=Job(op="rmsnorm", kernel=name, backend="interpreter", seed=0, max_examples=0), kind="done",
                 cases_run=1, failed=failed, current=None)


def test_log_shows_survivors_in_full_and_counts_the_rest(monkeypatch):
    clock = iter(float(t) for t in range(0, 1000, 3))  # each call 3 s later: a summary every few events
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    classify = lambda e: "killed" if e.failed else "survived"
    with progress_mod.Progress("mutate", 40, stream=out, classify=classify, shown=("survived",)) as p:
        for i in range(40):
            p(_done(f"gen.m{i}", failed=0 if i == 17 else 1))
    lines = out.getvalue().splitlines()
    assert [line for line in lines if "gen.m" in line] == ["[mutate] 18/40 rmsnorm/gen.m17: 1 cases, ok [survived]"]
    assert lines[-1].startswith("[mutate] 40/40 done: 39 killed, 1 survived;")
    assert 3 <= sum("done:" in line for line in lines) < 40  # periodic, not per mutant


def test_without_classify_every_job_gets_a_line():
    out = io.StringIO()
    with progress_mod.Progress("verify", 2, stream=out) as p:
        p(_done("a", 0))
        p(_done("b", 2))
    text = out.getvalue()
    assert "1/2 rmsnorm/a: 1 cases, ok" in text and "2/2 rmsnorm/b: 1 cases, 2 failed case(s)" in text


def test_the_summary_line_says_how_long_is_left_at_the_pace_so_far():
    from harness.execution.progress import eta

    assert eta(0, 10, 5.0) == ""  # no pace yet
    assert eta(10, 10, 50.0) == ""  # nothing left
    assert eta(2, 10, 20.0) == ", about 80 s left"
    assert eta(1, 10, 60.0) == ", about 9 min left"


def test_the_running_line_names_every_running_job(monkeypatch):
    # bug class: one line per period for whichever job reported last, so a slow kernel's
    # progress never showed in a CI log beside a fast one's
    clock = iter(float(t) for t in range(0, 1000, 20))
    monkeypatch.setattr(progress_mod.time, "monotonic", lambda: next(clock))
    out = io.StringIO()
    with progress_mod.Progress("verify", 3, stream=out) as p:
        p(_case("slow", 1, 0))
        for n in range(2, 6):
            p(_case("fast", n, 1 if n == 5 else 0))
        p(_done("done", 0))
        p(_case("fast", 6, 1))
    running = [line for line in out.getvalue().splitlines() if "running" in line]
    assert running and "rmsnorm/slow: 1 cases" in running[-1] and "rmsnorm/fast: 6 cases, 1 failed" in running[-1]
    assert "1/3 done" in running[-1] and "left" in running[-1]


def _case(name: str, cases: int, failed: int) -> Event:
    return Event(job=Job(op="rmsnorm", kernel=name, backend="interpreter", seed=0, max_examples=0), kind="case",
                 cases_run=cases, failed=failed, current=None)
