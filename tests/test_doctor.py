"""doctor and make clean. Bug classes: a doctor that reports healthy without running a kernel
(or despite wrong numbers), and a clean that deletes more than generated output or deletes
anything in a dry run."""

import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import dataclasses

from harness.cli import main
from harness.registry.registry import REGISTRY, load_project_kernels

ROOT = Path(__file__).resolve().parent.parent


def test_doctor_runs_a_real_computation(capsys):
    rc = main(["doctor"])
    out = capsys.readouterr().out
    assert "ok    rmsnorm/triton_rmsnorm on rmsnorm:" in out and "checks passed, worst error" in out
    assert "ok    fused_linear_cross_entropy/triton_flce on fused_linear_cross_entropy:" in out
    assert "torch " in out and "triton " in out
    assert (rc == 0) == ("FAIL" not in out)


def _replace_project_rmsnorm(monkeypatch, fn):
    load_project_kernels()
    key = ("rmsnorm", "triton_rmsnorm")
    monkeypatch.setitem(REGISTRY.entries, key, dataclasses.replace(REGISTRY.entries[key], fn=fn))


def test_doctor_fails_on_wrong_numbers(capsys, monkeypatch):
    _replace_project_rmsnorm(monkeypatch, lambda x, g, eps: x * g)
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  rmsnorm/triton_rmsnorm on rmsnorm:" in out and "forward failed" in out and "NOT healthy" in out


def test_doctor_reports_a_kernel_that_raises(capsys, monkeypatch):
    def broken(x, g, eps):
        raise RuntimeError("no compiler")

    _replace_project_rmsnorm(monkeypatch, broken)
    assert main(["doctor"]) == 1
    assert "kernel raised RuntimeError: no compiler" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_doctor_cuda_without_gpu_is_unhealthy_with_a_fix(capsys):
    assert main(["doctor", "--backend", "cuda"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  --backend cuda" in out and "->" in out


def test_doctor_bad_backend_is_usage_error():
    assert main(["doctor", "--backend", "gpu"]) == 2


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_clean_dry_run_removes_nothing_and_clean_spares_user_files(tmp_path):
    from reports import writer

    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "reports").mkdir()
    for name in ("__init__.py", "clean.py", "manifest.py"):  # what make clean runs (stdlib only)
        shutil.copy(ROOT / "reports" / name, tmp_path / "reports" / name)
    writer.write_json(tmp_path / "reports/out", "verify.json", {"passed": True})  # listed in the manifest
    generated = ["reports/out/verify.json", ".hypothesis/db", ".pytest_cache/x", "pkg/__pycache__/m.pyc"]
    # a user's file in the report directory is not the harness's to remove
    kept = ["reports/writer.py", "pkg/m.py", "notes.txt", ".venv/lib/__pycache__/keep.pyc", "reports/out/notes.md"]
    for rel in generated[1:] + kept:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")

    dry = subprocess.run(["make", "-s", "clean", "DRY_RUN=1"], cwd=tmp_path, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    for rel in ("reports/out", ".hypothesis", ".pytest_cache", "./pkg/__pycache__"):
        assert rel in dry.stdout
    assert all((tmp_path / rel).exists() for rel in generated + kept)

    real = subprocess.run(["make", "-s", "clean"], cwd=tmp_path, capture_output=True, text=True)
    assert real.returncode == 0, real.stderr
    assert not any((tmp_path / rel).exists() for rel in generated)
    assert all((tmp_path / rel).exists() for rel in kept)
    again = subprocess.run(["make", "-s", "clean"], cwd=tmp_path, capture_output=True, text=True)
    assert "nothing to remove" in again.stdout


def test_doctor_reports_the_caches_that_make_the_next_gate_fast(tmp_path, monkeypatch, capsys):
    import json
    import types

    from harness.cli import doctor

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    out = doctor._Out()
    doctor._caches(types.SimpleNamespace(name="cuda"), out)
    text = capsys.readouterr().out
    assert "Triton cache" in text and "is empty" in text and "no kill cache" in text and out.problems == 0
    (tmp_path / "triton" / "abc123").mkdir(parents=True)
    (tmp_path / "reports" / "out").mkdir(parents=True)
    (tmp_path / "reports" / "out" / "kill_cache.json").write_text(
        json.dumps({"format": 1, "backends": {"cuda": {"m1": "case", "m2": "case"}}}))
    doctor._caches(types.SimpleNamespace(name="cuda"), out)
    text = capsys.readouterr().out
    assert "1 compiled kernel entries" in text and "cuda: 2 mutants" in text
    doctor._caches(types.SimpleNamespace(name="interpreter"), out)  # the interpreter compiles nothing
    assert "Triton cache" not in capsys.readouterr().out


def test_the_interpreters_numpy_warnings_do_not_reach_the_doctors_output(capsys):
    # bug class: "RuntimeWarning: overflow encountered in exp" from inside the Triton interpreter
    # (a kernel's arithmetic on a huge input, judged by the checks) printed among the doctor's lines
    import warnings
    from types import SimpleNamespace

    from harness.cli import doctor
    from harness.run.backend import Backend

    def run_case(spec, entry, case, **kwargs):
        warnings.warn_explicit("overflow encountered in exp", RuntimeWarning, "interpreter.py", 725,
                               module="triton.runtime.interpreter")
        warnings.warn_explicit("the harness's own", RuntimeWarning, "runner.py", 1, module="harness.run.runner")
        return SimpleNamespace(records=[])

    spec = SimpleNamespace(floor_cases=lambda backend: [SimpleNamespace(id="rmsnorm:M=1,N=7", params=[("M", 1), ("N", 7)])])
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        doctor._one_case(spec, SimpleNamespace(op="rmsnorm", name="k"), Backend("interpreter", "cpu"), doctor._Out(),
                         run_case)
    shown = [str(w.message) for w in shown]
    assert "overflow encountered in exp" not in shown
    assert "the harness's own" in shown  # only the interpreter's arithmetic is silenced
    assert "rmsnorm/k on rmsnorm:M=1,N=7: 0 checks passed" in capsys.readouterr().out
