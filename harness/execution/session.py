"""What a run of jobs in one pool is, seen from the pool: a ``Session``.

A verify run (harness.verify.session.VerifySession) and a mutation campaign
(harness.mutation.session.CampaignSession) are both one: the jobs it queues, its ``Decision`` for
each queued job when its turn comes, what it does as each event arrives (progress, saving a
finished kernel, lowering a limit), and what it makes of the results once the pool has ended.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from harness.execution.job import Decision, Event, Job, JobResult

__all__ = ["Session"]


@runtime_checkable
class Session(Protocol):
    @property
    def jobs(self) -> list[Job]:
        """The jobs the pool runs or skips, in queue order."""

    def decide(self, job: Job) -> Decision:
        """Whether a queued job runs, is skipped or waits, when its turn comes."""

    def on_event(self, event: Event) -> None:
        """One job's case or end, as the pool sees it."""

    def result(self, results: list[JobResult]) -> Any:
        """What the run found, from every job's result (in ``jobs`` order)."""
