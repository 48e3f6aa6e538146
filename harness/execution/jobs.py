"""Isolation: kernels' (and mutants') suites run in worker processes, never in the parent.

A worker that segfaults, aborts or hangs cannot take the campaign down: the parent records
``crash`` or ``timeout`` against the job and the case the worker had started, kills the
worker and carries on with a fresh one (the workers and their authenticated event files:
harness.execution.workers; the job and its result: harness.execution.job). A healthy worker
takes job after job (start-up, imports and the CUDA context are paid once per worker, not once
per mutant).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Callable

from harness.settings import current as current_settings
from vocabulary import Backend, Check
from harness.execution.job import Decision, Event, EventKind, Job, JobResult, JobStatus
from harness.execution.workers import (
    Worker, crash_message, failure_record, forgeries, judged_status, share_key, visible_gpus, worker_env,
)

__all__ = ["Decision", "Event", "EventKind", "Job", "JobResult", "JobStatus", "Pool", "run_jobs"]


def _next_job(pending: list[tuple[int, Job]], decide: Callable[[Job], Decision] | None,
              results: dict[int, JobResult], on_event: Callable[[Event], None] | None) -> int | None:
    """The position in ``pending`` of the next job to start, or None. On the way, a job that
    ``decide`` says SKIP for is taken out as skipped; one it says WAIT for stays queued and the
    next is considered."""
    position = 0
    while position < len(pending):
        decision = decide(pending[position][1]) if decide is not None else Decision.RUN
        if decision is Decision.WAIT:
            position += 1
        elif decision is Decision.SKIP:
            index, job = pending.pop(position)
            results[index] = JobResult(job, JobStatus.SKIPPED, [], 0, 0.0)
            if on_event:
                on_event(Event(job, EventKind.SKIPPED, 0, 0, None))
        else:
            return position
    return None


def failed_cases(records) -> int:
    """Distinct failed cases among a job's records: what the report's "failed cases" counts."""
    return len({r.case_id for r in records if not r.passed})


def run_jobs(jobs: list[Job], *, parallel: int, on_event: Callable[[Event], None] | None = None,
             reuse: bool = True, decide: Callable[[Job], Decision] | None = None,
             stop: Callable[[], bool] | None = None) -> list[JobResult]:
    """Run every job in a worker process, at most ``parallel`` at a time; results in job order
    (``Pool``, for a caller that changes a job's limit while the pool runs)."""
    return Pool(jobs, parallel=parallel, on_event=on_event, reuse=reuse, decide=decide).run(stop=stop)


class Pool:
    """One run of jobs: the queue, the worker of each slot (idle or running a job), the results
    by job index and each job's time limit (by ``Job.id``; the position for a job without one).
    ``fill`` gives idle slots their next job, ``poll`` reads the running workers and turns each
    finished, dead or overdue one into a ``JobResult``.

    With ``reuse`` a worker runs job after job while it stays healthy (see ``Worker``);
    without it every job gets a fresh process. ``decide`` says, when a queued job's turn comes,
    whether to RUN it, SKIP it (it comes back with status ``skipped``; the campaign: once the
    sanity step has failed, the mutants' results would be discarded anyway) or let it WAIT in
    the queue while the jobs behind it go ahead (the campaign: a mutant whose memcheck first
    look is still running). ``set_limit`` changes a job's time limit, even while it runs."""

    def __init__(self, jobs: list[Job], *, parallel: int, on_event: Callable[[Event], None] | None = None,
                 reuse: bool = True, decide: Callable[[Job], Decision] | None = None):
        self.jobs, self.parallel, self.on_event, self.reuse, self.decide = jobs, parallel, on_event, reuse, decide
        self.ids = [job.id or f"#{index}" for index, job in enumerate(jobs)]
        if len(set(self.ids)) != len(self.ids):
            raise ValueError("the jobs of one run need distinct ids")
        self.limits = {job_id: job.timeout for job_id, job in zip(self.ids, jobs)}
        self.gpus = visible_gpus() if any(j.backend == Backend.CUDA for j in jobs) else []
        self.pending = list(enumerate(jobs))
        self.workers: dict[int, Worker] = {}
        self.results: dict[int, JobResult] = {}
        self.retried: set[int] = set()  # jobs whose worker died before reading them, run once more
        self.serial = 0
        self.workdir: Path | None = None

    def set_limit(self, job_id: str, seconds: float) -> None:
        """From now on the job ``job_id`` is over after ``seconds`` of running."""
        if job_id not in self.limits:
            raise KeyError(f"no job {job_id!r} in this run")
        self.limits[job_id] = seconds

    def limit(self, job_id: str) -> float:
        return self.limits[job_id]

    def run(self, *, stop: Callable[[], bool] | None = None) -> list[JobResult]:
        """Run the jobs; results in job order. If the run is interrupted (Ctrl-C, or SIGTERM from
        a CI time limit: the CLI turns it into KeyboardInterrupt), or ``stop`` says True between
        two polls, the workers are killed and every unfinished job comes back with status
        ``interrupted`` and the records it had so far, so the caller can still write its report."""
        poll_s = current_settings().poll_s
        with tempfile.TemporaryDirectory(prefix="harness-jobs-") as tmp:
            self.workdir = Path(tmp)
            try:
                while self.busy():
                    if stop is not None and stop():
                        self.interrupt()
                        break
                    self.fill()
                    time.sleep(poll_s)
                    self.poll()
            except KeyboardInterrupt:
                self.interrupt()
            finally:
                self.close()
        return [self.results[i] for i in range(len(self.jobs))]

    def busy(self) -> bool:
        return bool(self.pending) or any(not w.idle for w in self.workers.values())

    # --- handing out jobs ----------------------------------------------------------------
    def fill(self) -> None:
        for slot in range(max(1, self.parallel)):
            worker = self.workers.get(slot)
            if not self.pending or (worker is not None and not worker.idle):
                continue
            position = _next_job(self.pending, self.decide, self.results, self.on_event)
            if position is not None:
                self._assign(slot, *self.pending.pop(position))

    def _assign(self, slot: int, index: int, job: Job) -> None:
        worker = self.workers.get(slot)
        while True:
            started = False
            if worker is None or not self.reuse or job.fresh or not worker.usable_for(share_key(job)):
                if worker is not None:
                    worker.close()
                self.serial += 1
                env = worker_env(job, slot, self.gpus, os.environ, threads=(os.cpu_count() or 1) // max(1, self.parallel))
                worker = self.workers[slot] = Worker(slot, share_key(job), self.workdir, env, self.serial)
                started = True
            if worker.assign(index, job) or started:
                return  # a fresh worker already gone is polled like any other: crash, with its log
            worker.kill()  # a reused worker died between jobs: start another for this one
            worker = None

    # --- reading the running workers -----------------------------------------------------
    def poll(self) -> None:
        for slot, run in list(self.workers.items()):
            if not run.idle:
                self._poll_one(slot, run)

    def _poll_one(self, slot: int, run: Worker) -> None:
        before = run.cases_run
        run.read()
        if self.on_event and run.cases_run != before:
            failed = failed_cases(run.records)
            self.on_event(Event(run.job, EventKind.CASE, run.cases_run, failed, run.current))
        code = run.proc.poll()
        elapsed = time.monotonic() - run.started
        limit = self.limits[self.ids[run.index]]
        if not run.done and code is None and elapsed <= limit:
            return
        status = self._ended(run, code, limit)
        if status is None:  # retried elsewhere
            del self.workers[slot]
            return
        forgeries(run)
        job, index = run.job, run.index
        self.results[index] = JobResult(job, status, run.records, run.cases_run, round(elapsed, 3), run.log_tail(),
                                        run.proc.pid, run.gpu, incompetent=run.incompetent if run.done else None,
                                        harness_error=run.harness_error if run.done else None)
        run.release()
        if status is not JobStatus.OK:
            run.kill()  # already dead, or hung: nothing of it is reused
            del self.workers[slot]
        elif run.retired or not self.reuse or job.fresh:
            run.close()
            del self.workers[slot]
        if self.on_event:
            failed = failed_cases(self.results[index].records)
            self.on_event(Event(job, EventKind.DONE, self.results[index].cases_run, failed, None, self.results[index]))

    def _ended(self, run: Worker, code: int | None, limit: float) -> JobStatus | None:
        """How a job that is over ended (its failure record added); None if its worker died
        before it read the job, which is then queued again, once."""
        if run.done:
            return judged_status(run)
        if code is None:
            run.kill()
            run.read()
            run.records.append(failure_record(run, Check.TIMEOUT, f"no result after {limit:.0f} s: the worker was killed (hang?)"))
            return JobStatus.TIMEOUT
        run.read()
        if not run.done and not run.begun and run.index not in self.retried:
            self.retried.add(run.index)
            self.pending.insert(0, (run.index, run.job))
            run.release()
            run.kill()
            return None
        if run.done:
            return JobStatus.OK
        run.records.append(failure_record(run, Check.CRASH, crash_message(code, run.log_tail())))
        return JobStatus.CRASHED

    # --- the end -------------------------------------------------------------------------
    def interrupt(self) -> None:
        """Ctrl-C or SIGTERM: what each running job had so far, and the case it was running."""
        for run in self.workers.values():
            if not run.idle:
                run.read()
                forgeries(run)
                if run.current:  # the report names the case that was running
                    run.records.append(failure_record(run, Check.INTERRUPTED, "the run was interrupted while this case was running"))
                self.results[run.index] = JobResult(run.job, JobStatus.INTERRUPTED, run.records, run.cases_run,
                                                    round(time.monotonic() - run.started, 3), run.log_tail(), run.proc.pid,
                                                    run.gpu, run.current)
        for index, job in enumerate(self.jobs):
            self.results.setdefault(index, JobResult(job, JobStatus.INTERRUPTED, [], 0, 0.0))

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close() if worker.idle else worker.kill()
