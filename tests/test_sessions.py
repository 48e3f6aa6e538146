"""The sessions that run jobs in one pool (harness.execution.session.Session): a verify run's and a
campaign's. Bug classes: a session that the pool cannot drive (a method missing or renamed), a
verify job built from other settings than the run's, a CI part's local shards that miss or repeat
a global shard, and ``-x`` that lets a job start after a failure."""

from __future__ import annotations

from types import SimpleNamespace

from harness.execution.job import Decision, Event, EventKind, JobResult, JobStatus
from harness.execution.run_settings import RunSettings
from harness.execution.session import Session
from harness.mutation.session import CampaignSession
from harness.verify.session import VerifySession


def _session(*, exitfirst: bool, ci_shard=(1, 3), shards=2) -> VerifySession:
    entry = SimpleNamespace(op="rmsnorm", name="k")
    return VerifySession(entries=[entry], plans=[SimpleNamespace(reused=False)], to_run=[entry],
                         settings=RunSettings("interpreter", 7, 5, plugins=("p.py",), stop_at_first_failure=exitfirst),
                         timeout=30.0, ci_shard=ci_shard, shards=shards, exitfirst=exitfirst, store=None, baseline=None)


def test_both_sessions_follow_the_protocol():
    for cls in (VerifySession, CampaignSession):
        assert all(callable(getattr(cls, m, None)) for m in ("decide", "on_event", "result")), cls
        assert isinstance(getattr(cls, "jobs"), property), cls
    assert isinstance(_session(exitfirst=False), Session)
    assert not isinstance(object(), Session)  # the check itself can fail


def test_verify_jobs_are_built_from_the_run_settings_and_split_the_ci_part():
    jobs = _session(exitfirst=True).jobs
    assert [(j.seed, j.max_examples, j.plugins, j.timeout, j.stop_at_first_failure) for j in jobs] == [
        (7, 5, ("p.py",), 30.0, True)] * 2
    # part 1 of 3, split over 2 local shards: global shards 1 and 4 of 6
    assert [(j.shard, j.shards) for j in jobs] == [(1, 6), (4, 6)]
    parts = {(j.shard, j.shards) for i in range(3) for j in _session(exitfirst=False, ci_shard=(i, 3)).jobs}
    assert parts == {(g, 6) for g in range(6)}  # the 3 parts' local shards are every global shard once


def _done(session: VerifySession, *, passed: bool, status=JobStatus.OK) -> None:
    job = session.jobs[0]
    record = SimpleNamespace(passed=passed)
    result = JobResult(job=job, status=status, records=[record], cases_run=1, seconds=0.1)
    session.on_event(Event(job=job, kind=EventKind.DONE, cases_run=1, failed=int(not passed), current=None, result=result))


def test_exitfirst_skips_every_job_not_started_once_one_failed():
    session = _session(exitfirst=True, shards=3)  # fewer ended shards than 3: nothing is saved to a store
    _done(session, passed=True)
    assert session.decide(session.jobs[1]) is Decision.RUN
    _done(session, passed=False)
    assert session.decide(session.jobs[1]) is Decision.SKIP
    crashed = _session(exitfirst=True)
    _done(crashed, passed=True, status=JobStatus.CRASHED)
    assert crashed.decide(crashed.jobs[1]) is Decision.SKIP


def test_without_exitfirst_a_failure_stops_nothing():
    session = _session(exitfirst=False)
    _done(session, passed=False)
    assert session.decide(session.jobs[1]) is Decision.RUN
