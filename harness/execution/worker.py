"""The judge: ``python -m harness.execution.worker --serve``. Runs the jobs read from stdin.

Started by harness.execution.jobs with TRITON_INTERPRET already set for the interpreter
backend. Its first stdin line is the handshake ``{"secret": HEX, "events": PATH}``: where to
write events, and the key that authenticates them. Each further line is ``{"index": i,
"job": {...}}``.

The judge runs the suite (hypothesis generation and shrinking), makes the inputs, computes
the oracle, runs every check and writes the records. It never calls a kernel and never
imports user code (plugins, generated mutants): the kernel runs in a kernel process of its
own (harness.run.kernel_process), which owns the registry of user code; the judge imports
the op specs only. Every event line is ``MAC JSON``: an HMAC-SHA256 of the JSON under the
secret, which the kernel process never sees (it arrives on stdin, not in argv or the
environment), with a sequence number inside, so the parent can tell the judge's lines from
any a kernel appends to the file.

It acknowledges each job (``begin``); after each job it checks its own device and the kernel
process's (a sticky CUDA error) and says so in the job's ``done`` (``retire``: why the next
job needs a fresh worker; ``ended``: "crashed" or "timeout" if the kernel process died or
hung during the job; ``incompetent``: why the job's mutant cannot compile, when the kernel
process said so with a reply). It exits when stdin ends.
"""

from __future__ import annotations

import gc
import hashlib
import hmac
import json
import signal
import sys

from harness.orphans import die_with_parent
from vocabulary import WireEvent


class _Out:
    """Authenticated, numbered event lines, flushed at once (a crash loses nothing written)."""

    def __init__(self, path: str, secret: bytes):
        self.file = open(path, "a", buffering=1)
        self.secret, self.seq = secret, 0
        self.case_id: str | None = None  # the case the job is running (START), for a harness error

    def emit(self, event: WireEvent, **data) -> None:
        body = json.dumps({"event": event, "seq": self.seq, **data})
        self.seq += 1
        mac = hmac.new(self.secret, body.encode(), hashlib.sha256).hexdigest()
        self.file.write(f"{mac} {body}\n")
        self.file.flush()


def health(be) -> str | None:
    """None if the device still computes correctly after a job, else why not."""
    if be.is_interpreter:
        return None
    try:
        import torch

        torch.cuda.synchronize()
        probe = torch.arange(4, device=be.device, dtype=torch.float32)
        if float((probe + 1).sum()) != 10.0:
            return "the device returned a wrong result for a probe computation"
        gc.collect()
        torch.cuda.empty_cache()
    except Exception as exc:  # a sticky CUDA error (illegal address, device assert) poisons the context
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


class _RemoteRule:
    """A Contract(rule=...) as the judge sees it: the function stays in the kernel process, which
    answers for it (harness.run.kernel_process.KernelProcess.rule)."""

    def __init__(self, name: str, process) -> None:
        self.__qualname__ = name
        self.process = process

    def __call__(self, *args):
        if self.process is None:  # the deciding process's view (harness.registry.catalog): it never asks
            raise RuntimeError(f"Contract(rule={self.__qualname__}) is answered by the kernel process only")
        return self.process.rule(args)


def entry_view(op: str, name: str, data: dict, process=None):
    """The judge's view of a registered entry: what the kernel process said, without the function."""
    from harness.registry.registry import Contract, KernelEntry
    from harness.ops.strategies import dtype_from_name

    c = data["contract"]
    rule = _RemoteRule(c["rule"], process) if c.get("rule") else None
    contiguous = c["contiguous"] if isinstance(c["contiguous"], bool) else tuple(c["contiguous"])
    contract = Contract(dtypes=tuple(dtype_from_name(d) for d in c["dtypes"]) if c["dtypes"] is not None else None,
                        max_n=c["max_n"], contiguous=contiguous, deterministic=c["deterministic"],
                        unit_stride=tuple(c.get("unit_stride") or ()), max_leading_dims=c.get("max_leading_dims"),
                        self_limits=bool(c.get("self_limits")),
                        waive=dict(c.get("waive") or {}), precision=c.get("precision", "float32"), rule=rule,
                        forward_only=bool(c.get("forward_only")), inplace=dict(c.get("inplace") or {}))
    return KernelEntry(op, name, _called_in_the_judge, contract, data["kind"], data["origin"], data["defined_at"],
                       data["plugin"], data["description"], dict(data["meta"]))


def _called_in_the_judge(*args, **kwargs):
    raise RuntimeError("the judge never calls a kernel: kernel calls go through harness.run.kernel_host")


def run_job(job: dict, index: int, out: _Out, be, process) -> None:
    from harness.cases.case import Case
    from harness.run.kernel_process import ProcessHost
    from harness.run.suite import SuitePlan, run_suite

    process.start_ahead()  # its start-up (torch, the plugins) alongside the op's declaration here
    spec = _op_spec(job)
    entry = entry_view(job["op"], job["kernel"], process.bind(job["op"], job["kernel"]), process)

    def on_start(case):
        out.case_id = case.id
        out.emit(WireEvent.START, job=index, case_id=case.id)

    def progress(run):
        for r in run.records:
            out.emit(WireEvent.RECORD, job=index, record=r.to_dict())
        out.emit(WireEvent.CASE_DONE, job=index, case_id=run.case.id, passed=run.passed)

    plan = SuitePlan(backend=be.name, seed=job["seed"], max_examples=job["max_examples"],
                     only_case=Case.parse(job["case"]) if job.get("case") else None,
                     stop_at_first_failure=job["stop_at_first_failure"], shard=(job.get("shard", 0), job.get("shards", 1)),
                     floor_first=tuple(job.get("floor_first", ())), known_passed=frozenset(job.get("known_passed", ())))
    run_suite(
        spec,
        entry,
        plan,
        device=be.device,
        progress=progress,
        on_start=on_start,
        host=ProcessHost(process),
        base_host=_base_host(job, process),
    )


def _base_host(job: dict, process):
    """verify --baseline: the paired base kernel, in a kernel process of its own (its crash
    is never the head's). Closed with the judge's process."""
    if not job.get("baseline"):
        return None
    from harness.run.kernel_process import KernelProcess, ProcessHost

    if getattr(process, "base", None) is None:
        process.base = KernelProcess(plugins=process.plugins, extra_modules=process.extra_modules,
                                     library=process.library, backend=process.backend, settings=process.settings)
    process.base.begin_job()
    process.base.bind(job["op"], job["baseline"])
    return ProcessHost(process.base)


def _hide_memory(be) -> None:
    """Linux: make this process non-dumpable, so that a process of the same user (the kernel
    process) can neither read its memory (the secret) nor open its file descriptors through
    /proc. On the interpreter only: CUDA IPC is not checked under it."""
    if not be.is_interpreter:
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass  # the HMAC still authenticates the events


def _one_job(job: dict, index: int, out: _Out, be, process) -> str | None:
    """Run one job and write its ``done``; the reason to retire this worker, if any."""
    from harness.run.kernel_host import KernelEnd, KernelLost

    from harness.execution.fault import describe

    process.begin_job(fresh=bool(job.get("fresh_kernel")))
    error = fault = None
    out.case_id = None
    try:
        run_job(job, index, out, be, process)
    except KernelLost as lost:  # the kernel process could not even start or bind the entry
        error = lost.message
    except Exception as exc:  # the judge's own code: the kernel's answers come back as replies, never raise here
        fault = describe(exc, job, out.case_id)
    problem = health(be) or _kernel_health(process)
    if process.ended and not problem:
        problem = f"the kernel process {'hung' if process.ended is KernelEnd.TIMEOUT else 'was lost'} during the job"
    if fault is not None and not problem:
        problem = "the harness raised during the job"  # a fresh judge for the next job: nothing of this one is trusted
    out.emit(WireEvent.DONE, job=index, retire=problem, ended=process.ended or (KernelEnd.CRASHED if error else None), error=error,
             incompetent=process.incompetent, harness_error=fault)
    return problem


def _kernel_health(process) -> str | None:
    from harness.run.kernel_host import KernelLost

    try:
        return process.health()
    except KernelLost as lost:
        return lost.message


def serve() -> int:
    handshake = json.loads(sys.stdin.readline() or "{}")
    if "secret" not in handshake or "events" not in handshake:
        print("worker: the first stdin line must be {\"secret\": ..., \"events\": ...}", file=sys.stderr)
        return 2
    if isinstance(handshake.get("parent"), int):  # the pool killed hard: no judge goes on for nobody
        die_with_parent(signal.SIGKILL, parent=handshake["parent"])
    out = _Out(handshake["events"], bytes.fromhex(handshake["secret"]))
    be = process = loaded = None
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            message = json.loads(line)
            index, job = message["index"], message["job"]
            out.emit(WireEvent.BEGIN, job=index)  # the parent knows the job reached a live worker
            key = (tuple(job["plugins"]), tuple(job.get("extra_modules", ())), tuple(job.get("library", ())),
                   job.get("carrier", "*"))
            if be is None:
                be, process = _set_up(key, job)
                loaded = key
            elif key != loaded:  # the pool never does this; refuse rather than mix registries
                out.emit(WireEvent.RETIRE, job=index, reason="a job with other plugins or modules")
                return 3
            if _one_job(job, index, out, be, process):
                return 0
    finally:
        if process is not None:
            process.close()
            if getattr(process, "base", None) is not None:
                process.base.close()
    return 0


def _op_spec(job: dict):
    """The op's spec: a builtin, or one a plugin declares. Only for the latter does the judge
    import the plugin files (their op declarations; the kernels they register are captured and
    dropped: kernels run only in the kernel process)."""
    from harness.registry import loader
    from harness.registry.registry import REGISTRY

    if job["op"] not in REGISTRY.ops and job["plugins"]:
        with REGISTRY.capturing():
            for path in job["plugins"]:
                loader.load_plugin(path)
    return REGISTRY.op(job["op"])


def _set_up(key: tuple, job: dict):
    from harness.run import backend as backends
    from harness.run.kernel_process import KernelProcess
    from harness.settings import current

    be = backends.current()
    _hide_memory(be)  # before the kernel process starts: it must never reach this one's memory
    process = KernelProcess(plugins=key[0], extra_modules=key[1], library=(key[2], key[3]), backend=be.name,
                            settings=current())
    if not job.get("fresh_kernel"):  # (a fresh one is started by the job itself)
        process.start_ahead()  # its start-up beside this judge's own (torch, the op specs)
    from harness.registry.registry import load_builtin_ops

    load_builtin_ops()  # op specs only: user code is the kernel process's
    return be, process


if __name__ == "__main__":
    if sys.argv[1:] != ["--serve"]:
        sys.exit("usage: python -m harness.execution.worker --serve  (handshake, then job lines on stdin)")
    from harness.exits import end_now

    end_now(serve())  # every event is written and flushed: the pool need not wait for torch's teardown
