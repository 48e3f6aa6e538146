"""The kernel process shows the code it runs nothing that names the harness (harness.run.neutral).

Bug class: a candidate that computes right only while it sees it is under test (a harness module
in sys.modules, a harness frame above its call, a harness variable in the environment, the
harness in sys.argv) and returns zeros elsewhere passes its verification and fails its users.
Each fixture in tests/fixtures/tells/ looks for one tell; where the tell is shown (the control)
it is right, and under ``verify`` it must FAIL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.kernelbench import _call, _import
from harness.run import neutral

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "tests/fixtures/kernelbench/rowmean_problem.py"
TELLS = ["modules", "frames", "environment", "argv"]


def _candidate(tell: str) -> Path:
    return ROOT / f"tests/fixtures/tells/tell_{tell}.py"


@pytest.mark.parametrize("tell", TELLS)
def test_each_candidate_is_right_where_it_sees_the_harness(tell, monkeypatch):
    # the control: shown its tell (this process holds harness modules; harness.kernelbench._call is a
    # harness frame; a harness variable; the harness's command line), the candidate computes the mean
    monkeypatch.setenv("HARNESS_WATCHDOG_S", "5")
    monkeypatch.setattr(sys, "argv", ["python", "-m", "harness", "verify"])
    module = _import(str(_candidate(tell)), "--candidate")
    assert _call("the tell", module._sees_harness) is True
    x = torch.randn(4, 100)
    assert torch.equal(_call("forward", module.ModelNew(), x), torch.mean(x, dim=1))


def test_the_neutral_runner_shows_no_tell(tmp_path):
    # the kernel process's runner, in a process of its own: nothing that names the harness in
    # sys.modules, on the stack, in the environment or in argv, while the caller's grad mode holds
    code = """
import inspect, json, os, sys, torch
from harness.run import neutral
neutral.scrub_environment(); neutral.scrub_argv(); neutral.install()
def probe():
    return {"modules": sorted(m for m in sys.modules if m.split(".")[0] in neutral.HIDDEN),
            "frames": [f.filename for f in inspect.stack(0) if "harness" in f.filename
                       or str(f.frame.f_globals.get("__name__")).startswith("harness")],
            "files": [f.filename for f in inspect.stack(0)],
            "env": sorted(k for k in os.environ if "HARNESS" in k), "argv": sys.argv,
            "grad": torch.is_grad_enabled(), "inference": torch.is_inference_mode_enabled()}
with torch.no_grad():
    off = neutral.call(probe)
with torch.inference_mode():
    inference = neutral.call(probe)
print(json.dumps({"on": neutral.call(probe), "off": off, "inference": inference,
                  "back": "harness.run.neutral" in sys.modules}))
"""
    env = dict(os.environ, HARNESS_WATCHDOG_S="5")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    on = seen["on"]
    assert on["modules"] == [] and on["env"] == [] and on["argv"] == ["python"], on
    assert on["frames"] == [] and on["files"][:2] == ["<string>", neutral.NEUTRAL_FILE], on  # probe, trampoline
    assert on["grad"] and not seen["off"]["grad"] and seen["inference"]["inference"]
    assert seen["back"]  # the harness's modules are back once the call returns


def test_a_harness_function_is_called_under_a_neutral_name():
    from harness import kernelbench

    copy = neutral.function(kernelbench.op_name)
    assert copy("x/y_problem.py") == kernelbench.op_name("x/y_problem.py")
    assert copy.__code__.co_filename == neutral.NEUTRAL_FILE and copy.__globals__["__name__"] == "__main__"
    assert "__file__" not in copy.__globals__
    assert neutral.function(torch.mean) is torch.mean  # not the harness's: unchanged


@pytest.mark.parametrize("tell", TELLS)
def test_a_candidate_that_needs_to_see_the_harness_fails(tell, tmp_path):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "harness", "verify", "--reference", str(PROBLEM), "--candidate",
                           str(_candidate(tell)), "--backend", "interpreter", "--max-examples", "0", "--no-render",
                           "--watchdog", "120",  # sets a harness variable in the environment of every process
                           "--report-dir", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "verify.json").read_text())
    assert [k["verdict"] for k in report["kernels"]] == ["fail"]
    failed = [c for c in report["cases"] if not c["passed"]]
    assert failed and all(c["check"] != "crash" for c in failed), failed[:2]
