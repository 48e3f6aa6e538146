"""harness.execution.worker (the judge) + harness.run.kernel_process: a verdict a kernel cannot fool.

Each plugin under tests/fixtures/misbehaving/ is a correct RMSNorm plus one misbehaviour, most of
them on a generated case (after the floor). Before the judge ran apart from the kernel, each of
these gave PASS and exit status 0. Each test runs the real command in a subprocess and reads
verify.json.
"""

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from floors import rmsnorm_floor

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = "tests/fixtures/misbehaving"


def verify(tmp_path: Path, plugin: str, name: str, *extra: str, env: dict | None = None, timeout: float = 600):
    report = tmp_path / "report"
    command = [sys.executable, "-m", "harness", "verify", "--plugin", f"{FIXTURES}/{plugin}", "--select", name,
               "--backend", "interpreter", "--max-examples", "3", "--report-dir", str(report), "--jobs", "1",
               "--no-render", *extra]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    data = json.loads((report / "verify.json").read_text())
    return proc, data, time.monotonic() - started


def failures(data: dict, check: str) -> list[dict]:
    return [r for r in data["cases"] if not r["passed"] and r["check"] == check]


# bug class: a kernel that ends its process, or raises what is not an Exception, passed
@pytest.mark.parametrize("plugin, name, check, words", [
    ("exit_in_case.py", "exit_in_case", "forward", "SystemExit"),
    ("keyboard_interrupt.py", "keyboard_interrupt", "forward", "KeyboardInterrupt"),
    ("os_exit_in_case.py", "os_exit_in_case", "crash", "exited with status 0 during forward (the kernel called sys.exit/os._exit?)"),
    ("sigkill_in_case.py", "sigkill_in_case", "crash", "killed by SIGKILL during forward"),
    ("sigkill_in_case.py", "sigsegv_in_case", "crash", "killed by SIGSEGV during forward"),
    ("returns_none.py", "returns_none", "forward", "the kernel returned None, expected a tensor of shape"),
    ("forgets_a_row.py", "forgets_a_row", "forward", "Non-finite mismatches"),  # fresh memory is NaN
    ("patches_the_judge.py", "patches_the_judge", "forward", "Mismatched elements"),
])
def test_every_way_out_of_a_kernel_is_its_failure(tmp_path, plugin, name, check, words):
    proc, data, _ = verify(tmp_path, plugin, name)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (kernel,) = data["kernels"]
    assert kernel["verdict"] == "fail" and kernel["passed"] is False
    found = failures(data, check)
    assert found and all(words in r["message"] for r in found), [r["message"] for r in found]
    assert all(r["case_id"].startswith("rmsnorm:M=") for r in found)  # each names the case it happened on
    if name != "patches_the_judge":  # the others misbehave on generated cases only
        assert {r["phase"] for r in found} <= {"generated", "shrunk"}


def test_a_kernel_whose_contract_excludes_every_case_is_not_verified(tmp_path):  # bug class: vacuous pass
    proc, data, _ = verify(tmp_path, "excludes_every_case.py", "excludes_every_case")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (kernel,) = data["kernels"]
    assert kernel["verdict"] == "not verified" and kernel["passed"] is False and kernel["failed"] == 0
    assert kernel["value_comparisons"] == 0 and "contract" in kernel["unverified_reason"]
    assert "NOT VERIFIED" in proc.stdout
    allowed, data, _ = verify(tmp_path, "excludes_every_case.py", "excludes_every_case", "--allow-unverified")
    assert allowed.returncode == 0 and data["kernels"][0]["verdict"] == "not verified"


def test_a_nondeterministic_kernel_is_still_judged_on_its_second_run(tmp_path):  # bug class: unjudged repeat
    proc, data, _ = verify(tmp_path, "nondeterministic_wrong_second_run.py", "nondeterministic_wrong_second_run")
    assert proc.returncode == 1
    found = failures(data, "repeatable")
    assert found and "Contract(deterministic=False)" in found[0]["message"] and "second run is wrong" in found[0]["message"]


def test_a_forged_done_event_is_dropped_and_fails_the_job(tmp_path):  # bug class: forged verdict
    scratch, marker = tmp_path / "tmp", tmp_path / "forged"
    scratch.mkdir()
    env = {"TMPDIR": str(scratch), "FORGE_SEARCH_DIR": str(scratch), "FORGE_MARKER": str(marker)}
    proc, data, _ = verify(tmp_path, "forges_done_event.py", "forges_done_event", env=env)
    ran = [f"{r['check']}: {r['message'][:200]}" for r in data.get("cases", []) if not r["passed"]][:5]
    assert marker.exists(), f"the kernel never ran (exit {proc.returncode}): {ran}\n{proc.stderr[-1500:]}"
    assert int(marker.read_text()) >= 1  # the kernel did find the event file and append to it
    assert proc.returncode == 1
    assert failures(data, "forged_event") and failures(data, "crash")
    assert data["kernels"][0]["verdict"] == "fail"


def test_a_hang_is_caught_by_the_watchdog_in_seconds(tmp_path):  # bug class: a hang costs the job's 30 minutes
    proc, data, seconds = verify(tmp_path, "hangs.py", "hangs", "--watchdog", "3")
    assert proc.returncode == 1
    (kernel,) = data["kernels"]
    assert kernel["status"] == "timeout" and kernel["verdict"] == "fail"
    (hung,) = failures(data, "timeout")
    assert hung["case_id"].startswith("rmsnorm:M=") and hung["phase"] == "generated"
    assert "no reply from the kernel after" in hung["message"] and "during forward" in hung["message"]
    assert seconds < 300  # the job's own limit is 30 minutes


def test_an_interrupted_run_names_the_case_that_was_running(tmp_path):
    marker, report = tmp_path / "hanging", tmp_path / "report"
    command = [sys.executable, "-m", "harness", "verify", "--plugin", f"{FIXTURES}/hangs.py", "--select", "hangs_at_once",
               "--backend", "interpreter", "--max-examples", "0", "--report-dir", str(report), "--jobs", "1", "--no-render"]
    proc = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "HANG_MARKER": str(marker)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    time.sleep(1.0)  # the parent polls the event file every 50 ms
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    data = json.loads((report / "verify.json").read_text())
    (record,) = failures(data, "interrupted")
    assert record["case_id"] == rmsnorm_floor()[0].id  # the first floor case
    assert record["case_id"] in err


def test_the_judge_refuses_a_reply_that_would_run_code():  # bug class: a kernel process executing code in the judge
    import io

    from harness.run.kernel_process import _Unpickler

    evil = pickle.dumps(os.system)
    with pytest.raises(pickle.UnpicklingError, match="forbidden"):
        _Unpickler(io.BytesIO(evil)).load()


class _PickyConn:
    """A pipe end that refuses to send the first N replies holding a tensor (as CUDA IPC refuses
    to pass back a tensor the kernel process itself received through IPC)."""

    def __init__(self, refusals: int):
        self.refusals, self.sent = refusals, []

    def send(self, message):
        import torch

        holds_tensor = any(isinstance(v, torch.Tensor) for v in (message.get("value") or ()))
        if holds_tensor and self.refusals > 0:
            self.refusals -= 1
            raise RuntimeError("cannot share this storage")
        self.sent.append(message)


def test_an_output_that_cannot_be_shared_is_sent_as_a_copy_of_its_values():
    import torch

    from harness.run import kernel_server
    from harness.run.kernel_process import _reply

    grad = torch.arange(6.0).reshape(2, 3)
    conn = _PickyConn(refusals=1)
    kernel_server._send(conn, {"value": (grad, None), "error": None, "kernel_s": 0.0, "compile_s": 0.0})
    reply = _reply(conn.sent[-1])
    assert reply.error is None and torch.equal(reply.value[0], grad) and reply.value[1] is None
    assert reply.value[0].data_ptr() != grad.data_ptr()


def test_an_output_that_cannot_be_sent_at_all_fails_the_kernel_with_the_reason():
    import torch

    from harness.run import kernel_server
    from harness.run.kernel_process import _reply

    conn = _PickyConn(refusals=2)
    kernel_server._send(conn, {"value": (torch.ones(2),), "error": None, "kernel_s": 0.0, "compile_s": 0.0})
    reply = _reply(conn.sent[-1])  # a well-formed error reply, read by the judge like any other
    assert reply.value is None
    assert reply.error.type_name == "RuntimeError"
    assert "could not be handed to the judge" in reply.error.text and "cannot share this storage" in reply.error.text


# bug class: state kept between calls, invisible to any single call and to a second call on the same values
@pytest.mark.parametrize("name, check, words", [
    ("caches_by_pointer", "fresh_inputs", " wrong"),  # A's copies may land on a cached address too
    # the shared buffer shows as A's output changing under B, or as B wrong where A's output was read first
    # or as A's gradients gone once B reused its output (the graph went with the buffer)
    ("reuses_output_buffer", "fresh_inputs", ("the output the kernel returned for the case's own call changed",
                                              "state kept between calls", "on the calls before it")),
    ("inference_path_drops_eps", "no_grad", "under torch.no_grad wrong"),
    ("shared_workspace", "fresh_inputs", "A wrong"),
    ("frozen_x_drops_dgamma", "fresh_inputs", "only dgamma asked for) before A's backward: A within tolerance; B wrong"),
    ("keeps_inputs_in_ctx", "changed_input", "the gradients wrong"),
])
def test_state_kept_between_calls_fails(tmp_path, name, check, words):
    report = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "harness", "verify", "--plugin", "tests/fixtures/stateful/stateful_rmsnorm.py",
                           "--select", name, "--backend", "interpreter", "--max-examples", "0", "--report-dir", str(report),
                           "--jobs", "1", "--no-render"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    data = json.loads((report / "verify.json").read_text())
    found = failures(data, check)
    alternatives = (words,) if isinstance(words, str) else words
    assert found and all(any(w in r["message"] for w in alternatives) for r in found), [r["message"] for r in found][:3]
    assert any(alternatives[0] in r["message"] for r in found)  # the first, most specific, is said at least once


# bug class: under a long $TMPDIR (a deep CI workspace, pytest's tmp_path) the judge could not hand
# tensors to the kernel process ("AF_UNIX path too long"), swallowed the error, and every correct
# kernel came out as a 60 s hang
LONG = "d" * 40


def _long_tmpdir(tmp_path: Path) -> Path:
    deep = tmp_path / LONG / LONG
    deep.mkdir(parents=True)
    assert len(str(deep)) + len("/pymp-12345678/listener-12345678") > 107
    return deep


def test_a_correct_kernel_passes_under_a_long_tmpdir(tmp_path):
    case = "rmsnorm:M=17,N=257,dtype=float32,layout=transposed,values=normal,eps=1e-06,seed=7"
    report = tmp_path / "report"
    command = [sys.executable, "-m", "harness", "verify", "--op", "rmsnorm", "--select", "triton_rmsnorm", "--case", case,
               "--backend", "interpreter", "--report-dir", str(report), "--jobs", "1", "--no-render"]
    proc = subprocess.run(command, cwd=ROOT, env={**os.environ, "TMPDIR": str(_long_tmpdir(tmp_path))},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (kernel,) = json.loads((report / "verify.json").read_text())["kernels"]
    assert kernel["verdict"] == "pass" and kernel["value_comparisons"] > 0


SEND = """
import torch, torch.multiprocessing as mp
from harness.run.socket_dir import fit_socket_dir
if {fit}:
    fit_socket_dir()
mine, theirs = mp.get_context("spawn").Pipe()
mine.send((torch.ones(3),))
print(theirs.recv()[0].sum().item())
"""


@pytest.mark.parametrize("fit", [False, True])
def test_the_socket_dir_is_moved_only_where_the_path_would_not_fit(tmp_path, fit):
    proc = subprocess.run([sys.executable, "-c", SEND.format(fit=fit)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(_long_tmpdir(tmp_path))}, timeout=120)
    if fit:
        assert proc.returncode == 0 and proc.stdout.strip() == "3.0", proc.stderr[-2000:]
    else:  # what the judge met before: the send itself fails
        assert proc.returncode != 0 and "AF_UNIX path too long" in proc.stderr


def test_a_request_that_cannot_be_sent_is_the_machines_failure_not_a_hang(tmp_path, monkeypatch):
    from harness.run.kernel_host import KernelLost
    from harness.run.kernel_process import KernelProcess
    from harness.settings import current

    proc = KernelProcess(plugins=(), extra_modules=(), backend="interpreter", settings=current())
    try:
        proc.bind("rmsnorm", "triton_rmsnorm")

        class Refusing:
            def __init__(self, conn):
                self.conn = conn

            def send(self, message):
                raise OSError("AF_UNIX path too long")

            def __getattr__(self, name):
                return getattr(self.conn, name)

        proc.conn = Refusing(proc.conn)
        started = time.monotonic()
        with pytest.raises(KernelLost) as lost:
            proc.call("forward", (), ())
        assert time.monotonic() - started < 10  # not the watchdog's minute
        assert "could not hand the forward request" in lost.value.message and "AF_UNIX" in lost.value.message
        assert lost.value.fatal
    finally:
        proc.close()


def test_a_kernel_process_started_ahead_starts_before_the_judge_imports_torch():
    # bug class: a judge that starts its kernel process only after its own torch import and op
    # specs (start-ups one after the other); started ahead, the ready it sends is read as the
    # start-up's, never as the answer to the first request, and a health check waits for it too
    code = """
import json, sys
from harness.run.kernel_process import KernelProcess
from harness.settings import current
proc = KernelProcess(plugins=(), extra_modules=(), backend="interpreter", settings=current())
proc.start_ahead()
torch_before = "torch" in sys.modules
health = proc.health()
entry = proc.bind("rmsnorm", "triton_rmsnorm")
print(json.dumps({"torch_before": torch_before, "health": health, "starting": proc.starting,
                  "origin": entry.get("origin")}))
proc.close()
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"torch_before": False, "health": None, "starting": False, "origin": "project"}, seen
