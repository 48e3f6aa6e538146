"""``verify -x``: once a case has failed, the run stops, as pytest's ``-x`` stops its session.

Jobs not yet started are skipped (the pool's ``decide``) and jobs still running are stopped (the
pool's ``stop``). A kernel that a stop leaves unfinished is *not run*: its records so far cover
part of its cases, and a verdict on them could read PASS where the rest would fail. A kernel with
a failed case keeps the records of its jobs that ended (its FAIL), less those of its stopped ones.
"""

from __future__ import annotations

from harness.execution.job import JobResult, JobStatus


def settle(results: list[JobResult]) -> list[JobResult]:
    """The results of a run stopped at its first failure: each stopped job, and every job of a
    kernel that a stop left unfinished without a failure, as ``skipped`` (not run)."""
    stopped = {(r.job.op, r.job.kernel) for r in results if r.status is JobStatus.INTERRUPTED}
    failed = {(r.job.op, r.job.kernel) for r in results if r.status is not JobStatus.INTERRUPTED
              and (r.status is not JobStatus.OK or not all(record.passed for record in r.records))}
    return [JobResult(r.job, JobStatus.SKIPPED, [], 0, 0.0)
            if r.status is JobStatus.INTERRUPTED or ((r.job.op, r.job.kernel) in stopped - failed) else r
            for r in results]
