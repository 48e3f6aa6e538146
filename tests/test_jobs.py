"""harness.jobs: worker environments spread over every visible GPU; nothing assumes one GPU."""

from harness.jobs import Job, visible_gpus, worker_env


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
