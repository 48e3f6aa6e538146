"""Progress of running jobs: a live display on a terminal, plain periodic lines in CI logs."""

from __future__ import annotations

import collections
import sys
import time
from typing import Callable

from harness.execution.jobs import Event, EventKind, JobStatus
from harness.settings import current as current_settings


def eta(finished: int, total: int, elapsed: float) -> str:
    """", about N s left" at the pace so far ('' before the first job ends or after the last)."""
    if finished <= 0 or finished >= total:
        return ""
    left = elapsed / finished * (total - finished)
    return f", about {left / 60:.0f} min left" if left >= 120 else f", about {left:.0f} s left"


class Progress:
    """``classify`` (mutate): names what a finished job was ("killed", "survived", "sanity failed"
    ...); in a log (not a terminal) only the jobs whose class is in ``shown`` get a line of their
    own, and every ``summary_every_s`` seconds (harness.settings) one line counts them all (done/total, per class,
    elapsed). Without it every finished job gets a line (verify: one job per kernel)."""

    def __init__(self, title: str, total_jobs: int, *, stream=None, classify: Callable[[Event], str] | None = None,
                 shown: tuple[str, ...] = ()):
        self.title, self.total = title, total_jobs
        self.stream = stream or sys.stderr
        self.finished = 0
        self.live = self.stream.isatty()
        self.classify, self.shown = classify, shown
        self._settings = current_settings()
        self.counts: collections.Counter = collections.Counter()
        self._started = time.monotonic()
        self._last_summary = self._started
        self._last_line = 0.0
        self.running: dict[str, tuple[int, int]] = {}  # label -> (cases run, failed) of each running job
        self._rich = None
        if self.live:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            from rich.console import Console

            self._rich = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._task = self._rich.add_task(title, total=total_jobs, status="")

    def __enter__(self):
        if self._rich:
            self._rich.start()
        else:
            print(f"[{self.title}] {self.total} job(s)", file=self.stream, flush=True)
        return self

    def __exit__(self, *exc):
        if self._rich:
            self._rich.stop()
        elif self.classify:
            self._summary()

    def _summary(self) -> None:
        self._last_summary = time.monotonic()
        counts = ", ".join(f"{n} {what}" for what, n in sorted(self.counts.items()))
        elapsed = self._last_summary - self._started
        print(f"[{self.title}] {self.finished}/{self.total} done" + (f": {counts}" if counts else "")
              + f"; {elapsed:.0f} s" + eta(self.finished, self.total, elapsed), file=self.stream, flush=True)

    def __call__(self, event: Event) -> None:
        label = event.job.label
        if event.kind in (EventKind.DONE, EventKind.SKIPPED):
            self.running.pop(label, None)
            self.finished += 1
            verdict = "ok" if event.failed == 0 else f"{event.failed} failed case(s)"
            if event.result is not None and event.result.status is JobStatus.HARNESS_ERROR:
                verdict = "ERROR (harness): no verdict"
            line = f"[{self.title}] {self.finished}/{self.total} {label}: " + (
                f"{event.cases_run} cases, {verdict}" if event.kind is EventKind.DONE else f"not run ({event.current or 'skipped'})")
            what = self.classify(event) if self.classify else None
            if what:
                self.counts[what] += 1
            if self._rich:
                self._rich.update(self._task, advance=1, status=f"{label} done")
                self._rich.console.print(line)
            elif what is None or what in self.shown:
                print(line + (f" [{what}]" if what else ""), file=self.stream, flush=True)
            if not self._rich and self.classify and time.monotonic() - self._last_summary >= self._settings.summary_every_s:
                self._summary()
            return
        self.running[label] = (event.cases_run, event.failed)
        status = f"{label}: {event.cases_run} cases, {event.failed} failed"
        if self._rich:
            self._rich.update(self._task, status=status)
        elif self.classify:
            if time.monotonic() - self._last_summary >= self._settings.summary_every_s:
                self._summary()
        elif time.monotonic() - self._last_line > self._settings.running_line_every_s:
            self._last_line = time.monotonic()
            self._running_line()

    def _running_line(self) -> None:
        """Every running job's count on one line (a slow kernel is never hidden behind a fast
        one's lines), the jobs done and how long is left at the pace so far."""
        jobs = "; ".join(f"{label}: {cases} cases" + (f", {failed} failed" if failed else "")
                         for label, (cases, failed) in sorted(self.running.items()))
        elapsed = time.monotonic() - self._started
        print(f"[{self.title}] running {jobs} | {self.finished}/{self.total} done, {elapsed:.0f} s"
              + eta(self.finished, self.total, elapsed), file=self.stream, flush=True)
