"""Worker process: ``python -m harness.worker JOB.json OUT.jsonl``. Runs one job's suite.

Started by harness.jobs with TRITON_INTERPRET already set for the interpreter backend.
Writes one JSON line per event and flushes it, so a crash loses nothing already found.
"""

from __future__ import annotations

import json
import sys


def main(job_path: str, out_path: str) -> int:
    job = json.loads(open(job_path).read())
    out = open(out_path, "a", buffering=1)

    def emit(event: str, **data) -> None:
        out.write(json.dumps({"event": event, **data}) + "\n")
        out.flush()

    from harness import backend as backends

    be = backends.current()
    if be.is_interpreter:
        from harness import oob

        guard = oob.install()
        emit("guard", active=guard.active, reason=guard.reason)
    from harness import loader
    from harness.cases import Case
    from harness.registry import REGISTRY
    from harness.suite import run_suite

    loader.load_all(plugins=job["plugins"], extra_modules=job.get("extra_modules", ()))
    spec = REGISTRY.op(job["op"])
    entry = REGISTRY.get(job["op"], job["kernel"])

    def on_start(case):
        emit("start", case_id=case.id)

    def progress(run):
        for r in run.records:
            emit("record", record=r.to_dict())
        emit("case_done", case_id=run.case.id, passed=run.passed)

    run_suite(
        spec,
        entry,
        backend=be.name,
        device=be.device,
        seed=job["seed"],
        max_examples=job["max_examples"],
        only_case=Case.parse(job["case"]) if job.get("case") else None,
        stop_at_first_failure=job["stop_at_first_failure"],
        progress=progress,
        on_start=on_start,
    )
    emit("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
