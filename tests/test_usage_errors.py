"""Bad input is one line and exit 2 before any kernel runs (bug class: a usage error reported
as a kernel failure, exit 1, or as a traceback)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.registry.registry import REGISTRY
from harness.cases.case import Case

ROOT = Path(__file__).resolve().parent.parent
GOOD = "M=2,N=8,dtype=float32,layout=contiguous,values=normal,eps=1e-06,seed=1"


def harness(*args):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.parametrize("case, words", [
    ("rmsnorm:" + GOOD.replace("N=8,", ""), "missing parameter N"),
    ("rmsnorm:" + GOOD.replace("M=2", "M=-5"), "M=-5 is not allowed; M must be a whole number >= 1"),
    ("rmsnorm:" + GOOD.replace("float32", "int8"), "dtype=int8 is not allowed"),
])
def test_an_invalid_case_is_a_usage_error(tmp_path, case, words):
    proc = harness("verify", "--backend", "interpreter", "--case", case, "--report-dir", str(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "verify.json").exists()


def test_a_directory_as_plugin_says_so(tmp_path):
    proc = harness("verify", "--backend", "interpreter", "--plugin", str(tmp_path), "--report-dir", str(tmp_path / "out"))
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: plugin {tmp_path} is a directory, expected a .py file"


@pytest.mark.parametrize("op, bad, words", [
    ("rmsnorm", {"eps": 0.0}, "eps must be a finite number > 0"),
    ("rmsnorm", {"layout": "diagonal"}, "layout must be one of contiguous"),
    ("rmsnorm", {"extra": 1}, "unknown parameter extra"),
    ("fused_linear_cross_entropy", {"V": 0}, "V must be a whole number >= 1"),
    ("fused_linear_cross_entropy", {"ignored": "most"}, "ignored must be one of none, some, all"),
])
def test_validate_case_names_the_parameter(op, bad, words):
    spec = REGISTRY.op(op)
    good = spec.floor_cases(backend="interpreter")[0]
    spec.validate_case(good)  # the op's own cases are valid
    params = dict(good.params) | bad
    with pytest.raises(UsageError, match=words):
        spec.validate_case(Case(op, tuple(params.items())))


@pytest.mark.parametrize("op", ["rmsnorm", "fused_linear_cross_entropy"])
def test_every_floor_case_is_valid(op):
    spec = REGISTRY.op(op)
    for backend in ("interpreter", "cuda"):
        for case in spec.floor_cases(backend=backend):
            spec.validate_case(case)
