"""harness.execution.jobs: worker environments spread over every visible GPU; nothing assumes one GPU."""

from harness.execution.jobs import Job
from harness.execution.workers import visible_gpus, worker_env


def job(backend):
    return Job(op="rmsnorm", kernel="k", backend=backend, seed=0, max_examples=0)


def test_cuda_workers_are_spread_round_robin_over_the_visible_gpus():
    gpus = ["0", "1"]
    envs = [worker_env(job("cuda"), slot, gpus, {"TRITON_INTERPRET": "1", "PATH": "/bin"}) for slot in range(4)]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["0", "1", "0", "1"]
    assert all("TRITON_INTERPRET" not in e and e["PATH"] == "/bin" for e in envs)


def test_interpreter_workers_get_the_flag_and_keep_the_device_list_alone():
    env = worker_env(job("interpreter"), 3, ["0", "1"], {"CUDA_VISIBLE_DEVICES": "7"})
    assert env["TRITON_INTERPRET"] == "1" and env["CUDA_VISIBLE_DEVICES"] == "7"


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert visible_gpus() == ["2", "5"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == []


# --- the pool: worker reuse, crash isolation, sharding ------------------------------------------

from harness.execution.jobs import run_jobs  # noqa: E402

PLUGIN = "tests/fixtures/mutation_plugin.py"
SMALL = "rmsnorm:M=3,N=33,dtype=float32,layout=contiguous,values=normal,eps=1e-06,seed=5"


def small(kernel, **kw):
    return Job(op="rmsnorm", kernel=kernel, backend="interpreter", seed=0, max_examples=0, plugins=(PLUGIN,),
               case=SMALL, timeout=kw.pop("timeout", 120.0), **kw)


def test_a_healthy_worker_runs_job_after_job_and_a_crash_costs_only_its_worker():
    jobs = [small("triton_rmsnorm"), small("plugin.scaled"), small("plugin.segfaults"), small("triton_rmsnorm")]
    results = run_jobs(jobs, parallel=1)
    assert [r.status for r in results] == ["ok", "ok", "crashed", "ok"]
    assert [r.passed for r in results] == [True, False, False, True]
    first, scaled, crashed, after = results
    assert first.pid == scaled.pid == crashed.pid  # one process for the first three jobs
    assert after.pid != crashed.pid  # the crash took its worker down; the next job got a fresh one
    assert crashed.records[-1].check == "crash" and "SIGSEGV" in crashed.records[-1].message
    assert crashed.records[-1].case_id == SMALL  # recorded against the case it was running
    assert scaled.records and all(r.case_id == SMALL for r in scaled.records)  # no records leak across jobs


def test_without_reuse_every_job_gets_its_own_process():
    results = run_jobs([small("triton_rmsnorm"), small("triton_rmsnorm")], parallel=1, reuse=False)
    assert all(r.status == "ok" for r in results) and results[0].pid != results[1].pid


def test_a_hang_is_killed_at_its_limit_and_the_next_job_still_runs():
    results = run_jobs([small("plugin.hangs", timeout=8.0), small("triton_rmsnorm")], parallel=1)
    assert [r.status for r in results] == ["timeout", "ok"]
    assert results[0].records[-1].check == "timeout" and results[1].pid != results[0].pid


def test_workers_get_a_share_of_the_cpu_threads_unless_the_user_chose():
    assert worker_env(job("cuda"), 0, [], {}, threads=4)["OMP_NUM_THREADS"] == "4"
    assert worker_env(job("cuda"), 0, [], {}, threads=0)["OMP_NUM_THREADS"] == "1"
    assert worker_env(job("cuda"), 0, [], {"OMP_NUM_THREADS": "8"}, threads=4)["OMP_NUM_THREADS"] == "8"


def test_a_fresh_job_gets_a_worker_of_its_own():
    jobs = [small("triton_rmsnorm"), small("triton_rmsnorm", fresh=True), small("triton_rmsnorm")]
    results = run_jobs(jobs, parallel=1)
    assert all(r.status == "ok" for r in results)
    assert results[1].pid not in (results[0].pid, results[2].pid)


def test_mutate_jobs_default_is_a_worker_per_core_or_gpu_and_auto_fills_the_machine(monkeypatch):
    import os
    import types

    from harness.cli import common

    cuda, interp = types.SimpleNamespace(name="cuda"), types.SimpleNamespace(name="interpreter")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert common.mutate_jobs(None, cuda, 300) == 2  # one worker per visible GPU
    assert common.mutate_jobs(None, interp, 300) == (os.cpu_count() or 1)  # the machine's cores
    assert common.mutate_jobs(5, cuda, 300) == 5
    assert common.mutate_jobs("auto", cuda, 300) == max(4, (os.cpu_count() or 2) // 2)
    import argparse

    import pytest

    assert common.jobs_arg("auto") == "auto" and common.jobs_arg("3") == 3
    with pytest.raises(argparse.ArgumentTypeError):
        common.jobs_arg("0")


def test_a_worker_that_cannot_start_is_a_crash_not_an_endless_retry(monkeypatch):
    import sys as _sys

    monkeypatch.setattr(_sys, "executable", "/bin/false")  # every worker exits at once, status 1
    results = run_jobs([small("triton_rmsnorm"), small("triton_rmsnorm")], parallel=1)
    assert [r.status for r in results] == ["crashed", "crashed"]
    assert "exited with status 1" in results[0].records[-1].message


def test_a_worker_that_fails_its_health_check_is_retired_before_the_next_job():
    plugin = "tests/fixtures/retiring_plugin.py"
    jobs = [Job(op="rmsnorm", kernel=k, backend="interpreter", seed=0, max_examples=0, plugins=(plugin,), case=SMALL,
                timeout=120.0) for k in ("poisons_its_worker", "triton_rmsnorm", "triton_rmsnorm")]
    results = run_jobs(jobs, parallel=1)
    assert [r.status for r in results] == ["ok", "ok", "ok"] and all(r.passed for r in results)
    assert results[1].pid != results[0].pid  # retired after the poisoning job
    assert results[2].pid == results[1].pid  # the fresh worker is healthy and is reused


def test_a_crash_message_leads_with_the_workers_last_error_line():
    from harness.execution.workers import crash_message as _crash_message

    tail = ("  File \"harness/run/runner.py\", line 81, in enter\n    self.sync()\n"
            "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    msg = _crash_message(1, tail)
    # reports keep a message's first 500 characters: the cause must come before the traceback
    assert msg.startswith("the worker process exited with status 1: torch.AcceleratorError: CUDA error: an illegal memory access")
    assert msg.endswith(tail)
    assert _crash_message(-11, "") == "the worker process was killed by SIGSEGV"
    assert _crash_message(1, "no error line here") == "the worker process exited with status 1\nno error line here"
