"""Progress of running jobs: a live display on a terminal, plain periodic lines in CI logs."""

from __future__ import annotations

import sys
import time

from harness.execution.jobs import Event


class Progress:
    def __init__(self, title: str, total_jobs: int, *, stream=None):
        self.title, self.total = title, total_jobs
        self.stream = stream or sys.stderr
        self.finished = 0
        self.live = self.stream.isatty()
        self._last_line = 0.0
        self._rich = None
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn
            from rich.console import Console

            self._rich = RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
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

    def __call__(self, event: Event) -> None:
        label = event.job.label
        if event.kind in ("done", "skipped"):
            self.finished += 1
            verdict = "ok" if event.failed == 0 else f"{event.failed} failed check(s)"
            line = f"[{self.title}] {self.finished}/{self.total} {label}: " + (
                f"{event.cases_run} cases, {verdict}" if event.kind == "done" else f"not run ({event.current or 'skipped'})")
            if self._rich:
                self._rich.update(self._task, advance=1, status=f"{label} done")
                self._rich.console.print(line)
            else:
                print(line, file=self.stream, flush=True)
            return
        status = f"{label}: {event.cases_run} cases, {event.failed} failed"
        if self._rich:
            self._rich.update(self._task, status=status)
        elif time.monotonic() - self._last_line > 15:
            self._last_line = time.monotonic()
            print(f"[{self.title}] {status}", file=self.stream, flush=True)
