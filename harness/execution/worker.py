"""Worker process: ``python -m harness.execution.worker --serve OUT.jsonl``. Runs jobs read from stdin.

Started by harness.execution.jobs with TRITON_INTERPRET already set for the interpreter backend. Each
stdin line is ``{"index": i, "job": {...}}``; the worker loads the registry (plugins, extra
modules) once, runs each job's suite and writes one JSON line per event, tagged with the
job's index, flushed at once, so a crash loses nothing already found. It acknowledges each
job (``begin``); after each job it checks that its device still works and says so in the
job's ``done`` (``retire``: why not), exiting if not, so the next job runs in a fresh
process. It exits when stdin ends.
"""

from __future__ import annotations

import gc
import json
import sys


class _Out:
    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1)

    def emit(self, event: str, **data) -> None:
        self.file.write(json.dumps({"event": event, **data}) + "\n")
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


def run_job(job: dict, index: int, out: _Out, be) -> None:
    from harness.cases.case import Case
    from harness.registry.registry import REGISTRY
    from harness.run.suite import run_suite

    spec = REGISTRY.op(job["op"])
    entry = REGISTRY.get(job["op"], job["kernel"])

    def on_start(case):
        out.emit("start", job=index, case_id=case.id)

    def progress(run):
        for r in run.records:
            out.emit("record", job=index, record=r.to_dict())
        out.emit("case_done", job=index, case_id=run.case.id, passed=run.passed)

    run_suite(
        spec,
        entry,
        backend=be.name,
        device=be.device,
        seed=job["seed"],
        max_examples=job["max_examples"],
        only_case=Case.parse(job["case"]) if job.get("case") else None,
        stop_at_first_failure=job["stop_at_first_failure"],
        shard=(job.get("shard", 0), job.get("shards", 1)),
        floor_first=tuple(job.get("floor_first", ())),
        progress=progress,
        on_start=on_start,
    )


def serve(out_path: str) -> int:
    out = _Out(out_path)
    be = None
    loaded = None
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        index, job = message["index"], message["job"]
        out.emit("begin", job=index)  # the parent knows the job reached a live worker
        if be is None:
            from harness.run import backend as backends

            be = backends.current()
            if be.is_interpreter:
                from harness.run import oob

                guard = oob.install()
                out.emit("guard", job=index, active=guard.active, reason=guard.reason)
        key = (tuple(job["plugins"]), tuple(job.get("extra_modules", ())))
        if loaded is None:
            from harness.registry import loader

            loader.load_all(plugins=job["plugins"], extra_modules=job.get("extra_modules", ()))
            loaded = key
        elif key != loaded:  # the pool never does this; refuse rather than mix registries
            out.emit("retire", job=index, reason="a job with other plugins or modules")
            return 3
        run_job(job, index, out, be)
        problem = health(be)  # before "done": the parent must know before it hands out the next job
        out.emit("done", job=index, retire=problem)
        if problem:
            return 0
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--serve":
        sys.exit("usage: python -m harness.execution.worker --serve OUT.jsonl  (job lines on stdin)")
    sys.exit(serve(sys.argv[2]))
