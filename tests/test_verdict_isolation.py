"""The process that decides a verify run imports no user code (harness.registry.catalog).

Bug class: a plugin or KernelBench candidate imported in the verify process itself patches the
harness (here harness.cli.verify._run) and turns its FAIL into "all kernels passed", exit 0.
The fixtures forge the verdict wherever the verify command is loaded and leave a line per
process that imported them; the run must stay a FAIL (exit 1) and no such line may come from a
process with the verify command loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "tests/fixtures/isolation/forges_verdict_plugin.py"
CANDIDATE = ROOT / "tests/fixtures/isolation/forges_verdict_candidate.py"
PROBLEM = ROOT / "tests/fixtures/kernelbench/rowmean_problem.py"
CASE = "rmsnorm:M=3,N=33,dtype=float32,layout=contiguous,values=normal,eps=1e-06,seed=5"


def _run(args: list[str], marker: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, ISOLATION_MARKER=str(marker), TRITON_INTERPRET="1")
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


def _imports(marker: Path) -> list[dict]:
    return [json.loads(line) for line in marker.read_text().splitlines()] if marker.exists() else []


def test_the_fixture_forges_the_verdict_where_the_verify_command_imports_it(tmp_path):
    # the control: loaded the old way (in the verify process), the plugin does replace _run
    marker = tmp_path / "marker"
    code = ("import harness.cli.verify as v; from harness.registry import loader; "
            f"loader.load_plugin({str(PLUGIN)!r}); print(v._run.__name__)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, ISOLATION_MARKER=str(marker), TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "forged"
    assert [i["verify_loaded"] for i in _imports(marker)] == [True]


def test_a_plugin_that_patches_verify_gets_an_honest_fail(tmp_path):
    marker = tmp_path / "marker"
    proc = _run(["verify", "--backend", "interpreter", "--plugin", str(PLUGIN), "--op", "rmsnorm",
                 "--select", "forges_verdict", "--case", CASE, "--no-render", "--report-dir", str(tmp_path / "out")],
                marker)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "all kernels passed" not in proc.stdout
    report = json.loads((tmp_path / "out/verify.json").read_text())
    assert [k["verdict"] for k in report["kernels"]] == ["fail"]
    imports = _imports(marker)
    assert imports, "the plugin ran nowhere: the test would prove nothing"
    assert not any(i["verify_loaded"] for i in imports), imports


def test_a_candidate_that_patches_verify_gets_an_honest_fail(tmp_path):
    marker = tmp_path / "marker"
    proc = _run(["verify", "--backend", "interpreter", "--reference", str(PROBLEM), "--candidate", str(CANDIDATE),
                 "--max-examples", "0", "--no-render", "--report-dir", str(tmp_path / "out")], marker)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "all kernels passed" not in proc.stdout
    report = json.loads((tmp_path / "out/verify.json").read_text())
    assert [k["verdict"] for k in report["kernels"]] == ["fail"]
    imports = _imports(marker)
    assert imports and not any(i["verify_loaded"] for i in imports), imports


def test_the_catalog_describes_plugin_kernels_without_importing_them(tmp_path):
    # the deciding process's registry after catalog.load: the plugin's kernel and its contract,
    # file and line, with no plugin module (nor the project's kernels) in its sys.modules
    code = f"""
import json, sys
from harness.registry import catalog
from harness.registry.registry import REGISTRY
catalog.load([{str(PLUGIN)!r}, "examples/plugins/scaled_tanh.py"], op=None, select="*")
user = sorted(m for m in sys.modules if m.startswith(("plugin_", "user_", "kernels")))
e = REGISTRY.get("rmsnorm", "forges_verdict")
print(json.dumps({{"user": user, "forward_only": e.contract.forward_only, "defined_at": e.defined_at,
                   "plugin": e.plugin, "scaled_tanh": list(REGISTRY.op("scaled_tanh").value_checks()),
                   "kernels": sorted(x.name for x in REGISTRY.select(op="scaled_tanh"))}}))
"""
    marker = tmp_path / "marker"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, ISOLATION_MARKER=str(marker), TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["user"] == []
    assert seen["forward_only"] is True and seen["defined_at"].startswith(str(PLUGIN) + ":")
    assert seen["plugin"] == str(PLUGIN)
    assert seen["scaled_tanh"] and seen["kernels"]  # an op a plugin declares, described
    assert [i["verify_loaded"] for i in _imports(marker)] == [False]  # imported once, by the catalog child


def test_the_catalog_child_starts_before_torch_and_is_the_one_asked(tmp_path):
    # started ahead (before the deciding process imports torch) and then asked: one child, whose
    # reply fills the registry; a child started for a run that ends first is ended with it
    code = f"""
import json, sys
from harness.registry import catalog
catalog.start([{str(PLUGIN)!r}], op=None, select="*")
child = next(iter(catalog._STARTED.values()))
torch_before = "torch" in sys.modules
from harness.registry.registry import REGISTRY
catalog.load([{str(PLUGIN)!r}], op=None, select="*")
e = REGISTRY.get("rmsnorm", "forges_verdict")
catalog.start(["examples/plugins/scaled_tanh.py"], op=None, select="*")
left = next(iter(catalog._STARTED.values()))
print(json.dumps({{"torch_before": torch_before, "asked": child.returncode, "left": left.pid,
                   "kernel": e.name, "user": sorted(m for m in sys.modules if m.startswith(("plugin_", "kernels")))}}))
"""
    marker = tmp_path / "marker"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, ISOLATION_MARKER=str(marker), TRITON_INTERPRET="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["torch_before"] is False and seen["asked"] == 0
    assert seen["kernel"] == "forges_verdict" and seen["user"] == []
    assert [i["verify_loaded"] for i in _imports(marker)] == [False]  # one child, asked once
    assert not Path(f"/proc/{seen['left']}").exists()  # the unasked child ended with its parent


def test_a_plugin_that_fails_to_import_is_one_line_from_the_catalog(tmp_path):
    bad = tmp_path / "bad_plugin.py"
    bad.write_text("raise RuntimeError('no GPU here')\n")
    proc = _run(["verify", "--backend", "interpreter", "--plugin", str(bad), "--report-dir", str(tmp_path / "out")],
                tmp_path / "marker")
    assert proc.returncode == 2, proc.stderr
    assert "failed to import (line 1): RuntimeError: no GPU here" in proc.stderr and "Traceback" not in proc.stderr


def test_a_plugin_file_is_pinned_and_one_that_changes_during_the_run_gets_no_verdict(tmp_path):
    # a plugin file is hashed before any user code runs; verify.json records the hash, and a file
    # that changed on disk by the end of the run ends it as tampered (exit 3), never as a verdict
    plugin = tmp_path / "rewrites_itself_plugin.py"
    plugin.write_text((ROOT / "tests/fixtures/isolation/rewrites_itself_plugin.py").read_text())
    before = hashlib.sha256(plugin.read_bytes()).hexdigest()
    out = tmp_path / "out"
    proc = _run(["verify", "--plugin", str(plugin), "--case", CASE, "--report-dir", str(out)], tmp_path / "m")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "tampered" in proc.stdout + proc.stderr
    report = json.loads((out / "verify.json").read_text())
    assert report["pinned"]["plugins"] == [{"path": str(plugin.resolve()), "sha256": before}]
    assert str(plugin.resolve()) in report["tampered"]


def test_an_untouched_plugin_file_is_pinned_and_judged(tmp_path):
    out = tmp_path / "out"
    proc = _run(["verify", "--plugin", str(PLUGIN), "--case", CASE, "--report-dir", str(out)], tmp_path / "m")
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]  # its zeros: an honest FAIL
    report = json.loads((out / "verify.json").read_text())
    assert report["pinned"]["plugins"][0]["sha256"] == hashlib.sha256(PLUGIN.read_bytes()).hexdigest()
    assert "tampered" not in report
