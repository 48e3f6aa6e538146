"""A --reference run's start-up: the problem is fitted once, in the catalog child.

Bug classes: every process of a run (the catalog child, each judge, each kernel process)
measuring the problem's sizes again on the meta device (which imports torch._dynamo, seconds a
process) and probing the reference at each trial size; sizes applied in one process that differ
from those the catalog child fitted (a judge drawing cases of one shape, a kernel process built
for another); a wrong size name applied silently.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import kernelbench
from harness.reference import sizing

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests/fixtures/kernelbench"


def _fresh(name: str):
    mod = kernelbench._import(str(FIXTURES / f"{name}.py"), "--reference")
    for k, v in (getattr(mod, "_harness_original_sizes", None) or {}).items():
        setattr(mod, k, v)
    mod.__dict__.pop("_harness_original_sizes", None)
    return mod


def test_fitted_sizes_applied_elsewhere_give_the_same_module():
    mod = _fresh("conv_problem")
    fitted = sizing.fit(mod, mod.Model, backend="interpreter")
    assert fitted.scaled
    after = {k: getattr(mod, k) for k in fitted.sizes}
    record = {"sizes": fitted.record()}
    sizes = kernelbench.fitted_sizes(record)  # what the CLI writes into the generated plugin
    assert sizes == after
    mod = _fresh("conv_problem")
    assert {k: getattr(mod, k) for k in fitted.sizes} != after  # back at the file's sizes
    given = kernelbench.sizing_given(mod, json.loads(json.dumps(sizes)))  # through JSON: tuples come back as lists
    assert {k: getattr(mod, k) for k in fitted.sizes} == after
    assert given.sizes == fitted.sizes
    with pytest.raises(ValueError, match="no module-level size nope"):
        sizing.apply_fitted(_fresh("conv_problem"), {"nope": 3})
    _fresh("conv_problem")


def test_a_declaration_given_sizes_does_not_fit_again(monkeypatch):
    mod = _fresh("conv_problem")
    fitted = sizing.fit(mod, mod.Model, backend="interpreter")
    sizes = kernelbench.fitted_sizes({"sizes": fitted.record()})
    _fresh("conv_problem")

    class FittedAgain(BaseException):  # not an Exception: _fit takes those for a problem it cannot measure
        pass

    def no_fit(*args, **kwargs):
        raise FittedAgain("fitted again")

    monkeypatch.setattr(sizing, "fit", no_fit)
    monkeypatch.setattr(kernelbench, "_DECLARED", {})
    monkeypatch.setattr("harness.registry.registry.REGISTRY.ops", dict(__import__(
        "harness.registry.registry", fromlist=["REGISTRY"]).REGISTRY.ops))
    kernelbench.declare(str(FIXTURES / "conv_problem.py"), None, sizes=sizes)
    _fresh("conv_problem")
    kernelbench._DECLARED.clear()
    with pytest.raises(FittedAgain, match="fitted again"):  # the check can fail: without sizes, it fits
        kernelbench.declare(str(FIXTURES / "conv_problem.py"), None)
    _fresh("conv_problem")


def test_the_catalog_childs_fit_reaches_every_process_through_the_plugin(tmp_path):
    env = dict(os.environ, KB_PROBLEM=str(FIXTURES / "conv_problem.py"))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run([sys.executable, "-m", "harness", "verify", "--reference", str(FIXTURES / "conv_problem.py"),
                           "--candidate", str(FIXTURES / "identity.py"), "--backend", "interpreter",
                           "--report-dir", str(tmp_path), "--max-examples", "1", "--no-render"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    report = json.loads((tmp_path / "verify.json").read_text())
    fitted = {k: new for k, (_, new) in report["kernelbench"]["sizes"]["sizes"].items()}
    assert fitted
    (plugin,) = (tmp_path / "kernelbench").glob("kb_*.py")
    assert f"sizes={fitted!r}" in plugin.read_text()
    assert "tampered" not in report
