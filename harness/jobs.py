"""Isolation: each kernel's (or mutant's) suite runs in its own worker process.

A worker that segfaults, aborts or hangs cannot take the campaign down: the parent records
``crash`` or ``timeout`` against the case the worker had started, and carries on. Workers
stream JSON lines (case started, record) to a file, so nothing already found is lost.
On CUDA, worker slots are spread over the visible GPUs (CUDA_VISIBLE_DEVICES per worker).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from harness.cases import repro_command, Case
from harness.record import CaseRecord

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Job:
    op: str
    kernel: str
    backend: str  # resolved: "cuda" | "interpreter"
    seed: int
    max_examples: int
    plugins: tuple[str, ...] = ()
    case: str | None = None
    stop_at_first_failure: bool = False
    timeout: float = 1800.0
    extra_modules: tuple[str, ...] = ()  # modules that register more entries (e.g. generated mutants)

    @property
    def label(self) -> str:
        return f"{self.op}/{self.kernel}"


@dataclasses.dataclass
class JobResult:
    job: Job
    status: str  # "ok" | "crashed" | "timeout"
    records: list[CaseRecord]
    cases_run: int
    seconds: float
    log_tail: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "ok" and all(r.passed for r in self.records)


@dataclasses.dataclass
class Event:
    job: Job
    kind: str  # "case" | "done"
    cases_run: int
    failed: int
    current: str | None


def visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip()]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # no torch CUDA: no GPUs to spread over
        return []


def worker_env(job: Job, slot: int, gpus: list[str], base) -> dict:
    """The environment of the worker in ``slot``: the interpreter flag, or on CUDA one GPU per
    slot, round-robin over the visible GPUs (slots beyond the GPU count share them)."""
    env = dict(base)
    if job.backend == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
    return env


class _Running:
    def __init__(self, job: Job, slot: int, workdir: Path, env: dict):
        self.job, self.slot = job, slot
        self.out = workdir / f"job{id(job)}.jsonl"
        self.log = workdir / f"job{id(job)}.log"
        spec = workdir / f"job{id(job)}.json"
        spec.write_text(json.dumps(dataclasses.asdict(job)))
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.worker", str(spec), str(self.out)],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.offset = 0
        self.records: list[CaseRecord] = []
        self.cases_run = 0
        self.current: str | None = None
        self.done = False

    def read(self) -> bool:
        """Consume new lines; return True if anything new arrived."""
        if not self.out.exists():
            return False
        with self.out.open() as f:
            f.seek(self.offset)
            chunk = f.read()
        complete = chunk[: chunk.rfind("\n") + 1]
        self.offset += len(complete.encode())
        for line in filter(None, complete.split("\n")):
            event = json.loads(line)
            if event["event"] == "start":
                self.current = event["case_id"]
            elif event["event"] == "record":
                self.records.append(CaseRecord.from_dict(event["record"]))
            elif event["event"] == "case_done":
                self.cases_run += 1
                self.current = None
            elif event["event"] == "done":
                self.done = True
        return bool(complete)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


def _failure_record(run: _Running, check: str, message: str) -> CaseRecord:
    job = run.job
    case_id = run.current or "(between cases)"
    repro = ""
    if run.current:
        repro = repro_command(Case.parse(run.current), kernel=job.kernel, backend=job.backend, plugins=job.plugins)
    return CaseRecord(
        op=job.op, kernel=job.kernel, check=check, case_id=case_id, shape=[], dtype="", layout="",
        passed=False, repro=repro, message=message, phase="crash",
        seconds=round(time.monotonic() - run.started, 3),
    )


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


def run_jobs(jobs: list[Job], *, parallel: int, on_event: Callable[[Event], None] | None = None) -> list[JobResult]:
    """Run every job in a worker process, at most ``parallel`` at a time; results in job order."""
    gpus = visible_gpus() if any(j.backend == "cuda" for j in jobs) else []
    pending = list(enumerate(jobs))
    running: dict[int, tuple[int, _Running]] = {}  # slot -> (index, run)
    results: dict[int, JobResult] = {}
    with tempfile.TemporaryDirectory(prefix="harness-jobs-") as tmp:
        workdir = Path(tmp)
        while pending or running:
            for slot in range(max(1, parallel)):
                if slot not in running and pending:
                    index, job = pending.pop(0)
                    running[slot] = (index, _Running(job, slot, workdir, worker_env(job, slot, gpus, os.environ)))
            time.sleep(0.05)
            for slot, (index, run) in list(running.items()):
                before = run.cases_run
                run.read()
                if on_event and run.cases_run != before:
                    failed = sum(not r.passed for r in run.records)
                    on_event(Event(run.job, "case", run.cases_run, failed, run.current))
                code = run.proc.poll()
                elapsed = time.monotonic() - run.started
                if code is None and elapsed <= run.job.timeout:
                    continue
                if code is None:
                    run.kill()
                    run.read()
                    status = "timeout"
                    run.records.append(
                        _failure_record(run, "timeout", f"no result after {run.job.timeout:.0f} s: the worker was killed (hang?)")
                    )
                else:
                    run.read()
                    status = "ok" if code == 0 and run.done else "crashed"
                    if status == "crashed":
                        tail = run.log_tail()
                        run.records.append(
                            _failure_record(run, "crash", f"the worker process {_describe_exit(code)}" + (f":\n{tail}" if tail else ""))
                        )
                results[index] = JobResult(run.job, status, run.records, run.cases_run, round(elapsed, 3), run.log_tail())
                del running[slot]
                if on_event:
                    failed = sum(not r.passed for r in run.records)
                    on_event(Event(run.job, "done", run.cases_run, failed, None))
    return [results[i] for i in range(len(jobs))]
