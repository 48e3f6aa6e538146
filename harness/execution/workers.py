"""The worker processes of the pool (harness.execution.jobs), seen from the parent.

A worker runs the jobs it is handed one after another and streams JSON lines (case started,
record) to a file, so nothing already found is lost. Each line carries an HMAC under a secret
handed to the worker on stdin (harness.execution.worker): a line that fails it, or comes out of
sequence, was not written by the judge (a kernel that found the file) and is dropped and
recorded as the failed check ``forged_event``. On CUDA, worker slots are spread over the visible
GPUs (CUDA_VISIBLE_DEVICES per worker).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.exits import describe_exit
from harness.settings import PROJECT_ROOT
from harness.cases.case import repro_command, Case
from harness.execution.job import Job, JobStatus
from vocabulary import JOB_END, Backend, Check, KernelEnd, Phase, WireEvent
from vocabulary.records import CaseRecord


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
    if job.backend == Backend.INTERPRETER:
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = gpus[slot % len(gpus)]
    return env


class Worker:
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
                cwd=PROJECT_ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                text=True,
            )
        self.secret = secrets.token_bytes(32)
        self.seq = 0  # the sequence number the next authentic line must carry
        self._send({"secret": self.secret.hex(), "events": str(self.out), "parent": os.getpid()})
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
        self.cases_run = 0  # distinct cases: a case hypothesis runs again while shrinking counts once, as in the report
        self._case_ids: set[str] = set()
        self.current: str | None = None
        self.done = False
        self.begun = False  # the worker read the job (a worker that dies before has not run it)
        self.ended: JobStatus | None = None  # the judge says the kernel process crashed or hung (its KernelEnd)
        self.error: str | None = None
        self.incompetent: str | None = None
        self.harness_error: dict | None = None  # the judge's own code raised (harness.execution.fault)
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
            kind = WireEvent(event["event"])
            if kind is WireEvent.RETIRE or (kind is WireEvent.DONE and event.get("retire")):
                self.retired = True
            if event.get("job") != self.index or self.job is None:
                continue
            if kind is WireEvent.BEGIN:
                self.begun = True
            elif kind is WireEvent.START:
                self.current = event["case_id"]
            elif kind is WireEvent.RECORD:
                self.records.append(CaseRecord.from_dict(event["record"]))
            elif kind is WireEvent.CASE_DONE:
                self._case_ids.add(event.get("case_id"))
                self.cases_run = len(self._case_ids)
                self.current = None
            elif kind is WireEvent.DONE:
                self.done = True
                ended = event.get("ended")
                self.ended, self.error = JOB_END[KernelEnd(ended)] if ended else None, event.get("error")
                self.incompetent = event.get("incompetent")
                self.harness_error = event.get("harness_error")
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


def failure_record(run: Worker, check: Check, message: str) -> CaseRecord:
    job = run.job
    case_id = run.current or "(between cases)"
    repro = ""
    if run.current:
        repro = repro_command(Case.parse(run.current), kernel=job.kernel, backend=job.backend, plugins=job.plugins)
    return CaseRecord(
        op=job.op, kernel=job.kernel, check=str(check), case_id=case_id, shape=[], dtype="", layout="",
        passed=False, repro=repro, message=message, phase=Phase.CRASH,
        seconds=round(time.monotonic() - run.started, 3),
    )


_ERROR_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b|Fatal Python error|Segmentation fault)")


def crash_message(code: int, tail: str) -> str:
    """How the worker ended, its last error line first (reports keep a message's start: a CUDA
    error raised in the next case's oracle would otherwise be cut off behind its traceback),
    then the end of what it printed."""
    head = f"the worker process {describe_exit(code)}"
    error = next((line.strip() for line in reversed(tail.splitlines()) if _ERROR_LINE.match(line.strip())), "")
    return head + (f": {error}" if error else "") + (f"\n{tail}" if tail else "")


def judged_status(run: Worker) -> JobStatus:
    """The status of a job whose authentic ``done`` arrived: the judge says whether the kernel
    process crashed or hung (its failed record is already among the job's records), or that its
    own code raised (harness.execution.fault: no verdict, and no record against the kernel)."""
    if run.harness_error:
        return JobStatus.HARNESS_ERROR
    if run.error:  # the kernel process could not start, or could not find the entry
        run.records.append(failure_record(run, Check.TIMEOUT if run.ended is JobStatus.TIMEOUT else Check.CRASH, run.error))
    return run.ended or JobStatus.OK


def forgeries(run: Worker) -> None:
    """Lines of the event file the judge did not write fail the job (dropped, never read)."""
    if run.forged:
        run.records.append(failure_record(
            run, Check.FORGED_EVENT, f"{len(run.forged)} line(s) of the worker's event file failed authentication (wrong "
                                 f"HMAC or out of sequence): written by something other than the judge, such as the "
                                 f"kernel; dropped. First: {run.forged[0]!r}"))


def share_key(job: Job) -> tuple:
    """Jobs with one key can share a worker: the same backend, plugins, extra modules and library."""
    return (job.backend, job.plugins, job.extra_modules, job.library, job.carrier)
