"""Isolation: kernels' (and mutants') suites run in worker processes, never in the parent.

A worker that segfaults, aborts or hangs cannot take the campaign down: the parent records
``crash`` or ``timeout`` against the job and the case the worker had started, kills the
worker and carries on with a fresh one. Workers stream JSON lines (case started, record) to
a file, so nothing already found is lost. Each line carries an HMAC under a secret handed to
the worker on stdin (harness.execution.worker): a line that fails it, or comes out of
sequence, was not written by the judge (a kernel that found the file) and is dropped and
recorded as the failed check ``forged_event``. A healthy worker takes job after job (start-up,
imports and the CUDA context are paid once per worker, not once per mutant). On CUDA,
worker slots are spread over the visible GPUs (CUDA_VISIBLE_DEVICES per worker).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from harness.exits import describe_exit
from harness.settings import DEFAULTS, PROJECT_ROOT, current as current_settings
from harness.cases.case import repro_command, Case
from harness.record.case_record import CaseRecord, Phase

ROOT = PROJECT_ROOT


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
    timeout: float = DEFAULTS.job_timeout_s
    extra_modules: tuple[str, ...] = ()  # modules that register more entries (e.g. generated mutants)
    shard: int = 0  # this job runs the cases of shard ``shard`` of ``shards`` (harness.run.suite)
    shards: int = 1
    fresh: bool = False  # a worker of its own, closed after it (code the harness cannot vouch for)
    floor_first: tuple[str, ...] = ()  # floor case ids to run first (harness.run.suite; order only)
    baseline: str | None = None  # verify --baseline: the paired base entry (``base:<name>``), compared per case
    library: tuple[str, ...] = ()  # mutate --mutate-module: the library modules whose mutants the kernel process registers
    carrier: str = "*"  # mutate --carrier: the plugin kernels that run the library's mutants
    fresh_kernel: bool = False  # a kernel process of its own (a library mutant: nothing compiled before its swap)

    @property
    def label(self) -> str:
        part = f" [{self.shard + 1}/{self.shards}]" if self.shards > 1 else ""
        return f"{self.op}/{self.kernel}{part}"


class JobStatus(enum.StrEnum):
    """How a job ended. Reports hold the value (``"ok"``, ...)."""

    OK = "ok"
    CRASHED = "crashed"  # its worker or kernel process died
    TIMEOUT = "timeout"  # its worker or kernel process hung
    INTERRUPTED = "interrupted"  # the run was stopped before the job ended
    SKIPPED = "skipped"  # not run (run_jobs's ``skip``)


class EventKind(enum.StrEnum):
    CASE = "case"  # a case of the job finished
    DONE = "done"  # the job finished
    SKIPPED = "skipped"  # the job was not run (run_jobs's ``skip``)


@dataclasses.dataclass
class JobResult:
    job: Job
    status: JobStatus
    records: list[CaseRecord]
    cases_run: int
    seconds: float
    log_tail: str = ""
    pid: int = 0  # the worker process that ran it (a healthy worker runs many jobs)
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES of that worker (None: not on CUDA)
    current: str | None = None  # interrupted: the case the job was running
    incompetent: str | None = None  # the judge's word that the job's mutant does not compile (harness.mutation.mutagen)

    def __post_init__(self) -> None:
        self.status = JobStatus(self.status)

    @property
    def passed(self) -> bool:
        return self.status is JobStatus.OK and all(r.passed for r in self.records)


@dataclasses.dataclass
class Event:
    job: Job
    kind: EventKind
    cases_run: int
    failed: int
    current: str | None

    def __post_init__(self) -> None:
        self.kind = EventKind(self.kind)


def visible_gpus() -> list[str]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g for g in env.split(",") if g.strip()]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # no torch CUDA: no GPUs to spread over
        return []


def worker_env(job: Job, slot: int, gpus: list[str], base, threads: int | None = None) -> dict:
    """The environment of the worker in ``slot``: the interpreter flag, or on CUDA one GPU per
    slot, round-robin over the visible GPUs (slots beyond the GPU count share them); and its
    share of the CPU threads (``threads``), unless the user set OMP_NUM_THREADS: parallel
    workers that each start a thread per core oversubscribe the machine."""
    env = dict(base)
    if threads is not None and "OMP_NUM_THREADS" not in base:
        env["OMP_NUM_THREADS"] = str(max(1, threads))
    if job.backend == "interpreter":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
    return env


class _Worker:
    """A worker process that runs the jobs it is handed one after another (same backend,
    plugins and modules: the ``key``), so torch, the CUDA context and the registry are set up
    once per worker instead of once per mutant. After each job the worker checks its own
    health (on CUDA: a synchronise and a tiny computation); a worker whose device is in an
    error state says ``retire`` and exits, and the next job gets a fresh process. A crash or
    a hang kills only the worker and is recorded against the job it was running."""

    def __init__(self, slot: int, key: tuple, workdir: Path, env: dict, serial: int):
        self.slot, self.key = slot, key
        self.gpu = env.get("CUDA_VISIBLE_DEVICES") if "TRITON_INTERPRET" not in env else None
        self.out = workdir / f"worker{serial}.jsonl"
        self.log = workdir / f"worker{serial}.log"
        with self.log.open("wb") as log:  # the child keeps its own descriptor; the parent reads the file
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness.execution.worker", "--serve"],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                text=True,
            )
        self.secret = secrets.token_bytes(32)
        self.seq = 0  # the sequence number the next authentic line must carry
        self._send({"secret": self.secret.hex(), "events": str(self.out)})
        self.offset = 0
        self.index: int | None = None
        self.job: Job | None = None
        self.retired = False

    @property
    def idle(self) -> bool:
        return self.job is None

    def usable_for(self, key: tuple) -> bool:
        return self.idle and not self.retired and key == self.key and self.proc.poll() is None

    def assign(self, index: int, job: Job) -> bool:
        """Hand ``job`` to the worker; False if the worker is gone (the caller starts another)."""
        self.index, self.job = index, job
        self.records: list[CaseRecord] = []
        self.cases_run = 0
        self.current: str | None = None
        self.done = False
        self.begun = False  # the worker read the job (a worker that dies before has not run it)
        self.ended: JobStatus | None = None  # the judge says the kernel process crashed or hung (its KernelEnd)
        self.error: str | None = None
        self.incompetent: str | None = None
        self.forged: list[str] = []  # lines that failed authentication
        self.started = time.monotonic()
        self.log_start = self.log.stat().st_size if self.log.exists() else 0
        return self._send({"index": index, "job": dataclasses.asdict(job)})

    def _send(self, message: dict) -> bool:
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def _authentic(self, line: str) -> dict | None:
        """The event of an authentic line (right MAC, next in sequence), else None."""
        mac, _, body = line.partition(" ")
        expected = hmac.new(self.secret, body.encode(), hashlib.sha256).hexdigest()
        try:
            event = json.loads(body) if hmac.compare_digest(mac, expected) else None
        except ValueError:
            event = None
        if event is None or event.get("seq") != self.seq:
            self.forged.append(line[:200])
            return None
        self.seq += 1
        return event

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
            event = self._authentic(line)
            if event is None:
                continue
            if event["event"] == "retire" or (event["event"] == "done" and event.get("retire")):
                self.retired = True
            if event.get("job") != self.index or self.job is None:
                continue
            if event["event"] == "begin":
                self.begun = True
            elif event["event"] == "start":
                self.current = event["case_id"]
            elif event["event"] == "record":
                self.records.append(CaseRecord.from_dict(event["record"]))
            elif event["event"] == "case_done":
                self.cases_run += 1
                self.current = None
            elif event["event"] == "done":
                self.done = True
                ended = event.get("ended")
                self.ended, self.error = JobStatus(ended) if ended else None, event.get("error")
                self.incompetent = event.get("incompetent")
        return bool(complete)

    def release(self) -> None:
        self.index, self.job = None, None

    def close(self) -> None:
        """Let an idle worker finish (end of its input), killing it if it does not."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def log_tail(self, lines: int = 15) -> str:
        """The last lines the worker printed while running its current job."""
        try:
            with self.log.open("rb") as f:
                f.seek(self.log_start)
                text = f.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


def _failure_record(run: _Worker, check: str, message: str) -> CaseRecord:
    job = run.job
    case_id = run.current or "(between cases)"
    repro = ""
    if run.current:
        repro = repro_command(Case.parse(run.current), kernel=job.kernel, backend=job.backend, plugins=job.plugins)
    return CaseRecord(
        op=job.op, kernel=job.kernel, check=check, case_id=case_id, shape=[], dtype="", layout="",
        passed=False, repro=repro, message=message, phase=Phase.CRASH,
        seconds=round(time.monotonic() - run.started, 3),
    )


_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b|Fatal Python error|Segmentation fault)")


def _crash_message(code: int, tail: str) -> str:
    """How the worker ended, its last error line first (reports keep a message's start: a CUDA
    error raised in the next case's oracle would otherwise be cut off behind its traceback),
    then the end of what it printed."""
    head = f"the worker process {describe_exit(code)}"
    error = next((line.strip() for line in reversed(tail.splitlines()) if _ERROR_LINE.match(line.strip())), "")
    return head + (f": {error}" if error else "") + (f"\n{tail}" if tail else "")


def _judged_status(run: _Worker) -> JobStatus:
    """The status of a job whose authentic ``done`` arrived: the judge says whether the kernel
    process crashed or hung (its failed record is already among the job's records)."""
    if run.error:  # the kernel process could not start, or could not find the entry
        run.records.append(_failure_record(run, "timeout" if run.ended is JobStatus.TIMEOUT else "crash", run.error))
    return run.ended or JobStatus.OK


def _forgeries(run: _Worker) -> None:
    """Lines of the event file the judge did not write fail the job (dropped, never read)."""
    if run.forged:
        run.records.append(_failure_record(
            run, "forged_event", f"{len(run.forged)} line(s) of the worker's event file failed authentication (wrong "
                                 f"HMAC or out of sequence): written by something other than the judge, such as the "
                                 f"kernel; dropped. First: {run.forged[0]!r}"))


def _key(job: Job) -> tuple:
    """Jobs with one key can share a worker: the same backend, plugins, extra modules and library."""
    return (job.backend, job.plugins, job.extra_modules, job.library, job.carrier)


def _next_job(pending: list[tuple[int, Job]], skip: Callable[[Job], bool | None] | None,
              results: dict[int, JobResult], on_event: Callable[[Event], None] | None) -> int | None:
    """The position in ``pending`` of the next job to start, or None. On the way, a job that
    ``skip`` says True for is taken out as skipped; one it says None for (not decided yet)
    stays queued and the next is considered."""
    position = 0
    while position < len(pending):
        verdict = skip(pending[position][1]) if skip is not None else False
        if verdict is None:
            position += 1
        elif verdict:
            index, job = pending.pop(position)
            results[index] = JobResult(job, JobStatus.SKIPPED, [], 0, 0.0)
            if on_event:
                on_event(Event(job, EventKind.SKIPPED, 0, 0, None))
        else:
            return position
    return None


def run_jobs(jobs: list[Job], *, parallel: int, on_event: Callable[[Event], None] | None = None,
             reuse: bool = True, skip: Callable[[Job], bool | None] | None = None) -> list[JobResult]:
    """Run every job in a worker process, at most ``parallel`` at a time; results in job order.

    With ``reuse`` a worker runs job after job while it stays healthy (see ``_Worker``);
    without it every job gets a fresh process. If the run is interrupted (Ctrl-C, or SIGTERM
    from a CI time limit: the CLI turns it into KeyboardInterrupt), the workers are killed and
    every unfinished job comes back with status ``interrupted`` and the records it had so far,
    so the caller can still write its report. A job for which ``skip`` says True when its turn
    comes is not run and comes back with status ``skipped`` (the campaign: once the sanity step
    has failed, the mutants' results would be discarded anyway); one for which it says None is
    not decided yet and waits in the queue while the jobs behind it go ahead (the campaign: a
    mutant whose memcheck first look is still running)."""
    poll_s = current_settings().poll_s
    with tempfile.TemporaryDirectory(prefix="harness-jobs-") as tmp:
        pool = _Scheduler(jobs, parallel=parallel, on_event=on_event, reuse=reuse, skip=skip, workdir=Path(tmp))
        try:
            while pool.busy():
                pool.fill()
                time.sleep(poll_s)
                pool.poll()
        except KeyboardInterrupt:
            pool.interrupt()
        finally:
            pool.close()
    return [pool.results[i] for i in range(len(jobs))]


class _Scheduler:
    """One ``run_jobs`` call: the queue, the worker of each slot (idle or running a job), the
    results by job index. ``fill`` gives idle slots their next job, ``poll`` reads the running
    workers and turns each finished, dead or overdue one into a ``JobResult``."""

    def __init__(self, jobs: list[Job], *, parallel: int, on_event, reuse: bool, skip, workdir: Path):
        self.jobs, self.parallel, self.on_event, self.reuse, self.skip, self.workdir = jobs, parallel, on_event, reuse, skip, workdir
        self.gpus = visible_gpus() if any(j.backend == "cuda" for j in jobs) else []
        self.pending = list(enumerate(jobs))
        self.workers: dict[int, _Worker] = {}
        self.results: dict[int, JobResult] = {}
        self.retried: set[int] = set()  # jobs whose worker died before reading them, run once more
        self.serial = 0

    def busy(self) -> bool:
        return bool(self.pending) or any(not w.idle for w in self.workers.values())

    # --- handing out jobs ----------------------------------------------------------------
    def fill(self) -> None:
        for slot in range(max(1, self.parallel)):
            worker = self.workers.get(slot)
            if not self.pending or (worker is not None and not worker.idle):
                continue
            position = _next_job(self.pending, self.skip, self.results, self.on_event)
            if position is not None:
                self._assign(slot, *self.pending.pop(position))

    def _assign(self, slot: int, index: int, job: Job) -> None:
        worker = self.workers.get(slot)
        while True:
            started = False
            if worker is None or not self.reuse or job.fresh or not worker.usable_for(_key(job)):
                if worker is not None:
                    worker.close()
                self.serial += 1
                env = worker_env(job, slot, self.gpus, os.environ, threads=(os.cpu_count() or 1) // max(1, self.parallel))
                worker = self.workers[slot] = _Worker(slot, _key(job), self.workdir, env, self.serial)
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

    def _poll_one(self, slot: int, run: _Worker) -> None:
        before = run.cases_run
        run.read()
        if self.on_event and run.cases_run != before:
            failed = sum(not r.passed for r in run.records)
            self.on_event(Event(run.job, EventKind.CASE, run.cases_run, failed, run.current))
        code = run.proc.poll()
        elapsed = time.monotonic() - run.started
        if not run.done and code is None and elapsed <= run.job.timeout:
            return
        status = self._ended(run, code)
        if status is None:  # retried elsewhere
            del self.workers[slot]
            return
        _forgeries(run)
        job, index = run.job, run.index
        self.results[index] = JobResult(job, status, run.records, run.cases_run, round(elapsed, 3), run.log_tail(),
                                        run.proc.pid, run.gpu, incompetent=run.incompetent if run.done else None)
        run.release()
        if status is not JobStatus.OK:
            run.kill()  # already dead, or hung: nothing of it is reused
            del self.workers[slot]
        elif run.retired or not self.reuse or job.fresh:
            run.close()
            del self.workers[slot]
        if self.on_event:
            failed = sum(not r.passed for r in self.results[index].records)
            self.on_event(Event(job, EventKind.DONE, self.results[index].cases_run, failed, None))

    def _ended(self, run: _Worker, code: int | None) -> JobStatus | None:
        """How a job that is over ended (its failure record added); None if its worker died
        before it read the job, which is then queued again, once."""
        if run.done:
            return _judged_status(run)
        if code is None:
            run.kill()
            run.read()
            run.records.append(_failure_record(run, "timeout", f"no result after {run.job.timeout:.0f} s: the worker was killed (hang?)"))
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
        run.records.append(_failure_record(run, "crash", _crash_message(code, run.log_tail())))
        return JobStatus.CRASHED

    # --- the end -------------------------------------------------------------------------
    def interrupt(self) -> None:
        """Ctrl-C or SIGTERM: what each running job had so far, and the case it was running."""
        for run in self.workers.values():
            if not run.idle:
                run.read()
                _forgeries(run)
                if run.current:  # the report names the case that was running
                    run.records.append(_failure_record(run, "interrupted", "the run was interrupted while this case was running"))
                self.results[run.index] = JobResult(run.job, JobStatus.INTERRUPTED, run.records, run.cases_run,
                                                    round(time.monotonic() - run.started, 3), run.log_tail(), run.proc.pid,
                                                    run.gpu, run.current)
        for index, job in enumerate(self.jobs):
            self.results.setdefault(index, JobResult(job, JobStatus.INTERRUPTED, [], 0, 0.0))

    def close(self) -> None:
        for worker in self.workers.values():
            worker.close() if worker.idle else worker.kill()
