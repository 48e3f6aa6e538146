"""Incremental runs: a verdict is reused exactly while nothing that can change it has changed."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from harness.incremental import key as keys
from harness.incremental import plan as incremental
from harness.incremental.store import Store

ROOT = Path(__file__).resolve().parent.parent

# a torch-only RMSNorm (no Triton): fast, and its file is the plugin's whole closure
PLUGIN = '''
import torch
from harness import register_kernel

@register_kernel("rmsnorm", name="torch_rms_inc")
def torch_rms_inc(x, gamma, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()).to(x.dtype)
'''


def _package(tmp_path, monkeypatch):
    """A throw-away package: a kernel module with a jit helper in another module, an op spec
    importing its oracle, and an unrelated module."""
    pkg = tmp_path / "incpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("def block():\n    return 128\n")
    (pkg / "kern.py").write_text("from incpkg.helper import block\n\ndef kernel(x):\n    return x * block()\n")
    (pkg / "oracle.py").write_text("def reference(x):\n    return x * 128\n")
    (pkg / "spec.py").write_text("from incpkg import oracle\n\nclass Spec:\n    reference = oracle.reference\n")
    (pkg / "unrelated.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "incpkg" or m.startswith("incpkg.")]:
        monkeypatch.delitem(sys.modules, name)  # another test's package of the same name
    return pkg


def _key(module_kernel="incpkg.kern", module_op="incpkg.spec"):
    keys.closure.cache_clear()
    return keys.digest({"kernel": dict(keys.closure(module_kernel)), "op": dict(keys.closure(module_op))})


def test_the_key_follows_the_closure_of_the_kernel_and_of_the_op(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch)
    first = _key()
    (pkg / "unrelated.py").write_text("X = 2\n")
    assert _key() == first  # a file neither imports: same key
    (pkg / "helper.py").write_text("def block():\n    return 64\n")
    second = _key()
    assert second != first  # one line of a module the kernel imports (its jit helper)
    (pkg / "oracle.py").write_text("def reference(x):\n    return x * 64\n")
    third = _key()
    assert third != second  # the op's oracle: every kernel of the op reruns
    assert _key() == third  # and the key is stable
    closure = dict(keys.closure("incpkg.kern"))
    assert {"incpkg.kern", "incpkg.helper"} <= set(closure) and "incpkg.unrelated" not in closure


def test_a_rerun_names_the_changed_file(tmp_path, monkeypatch):
    pkg = _package(tmp_path, monkeypatch)
    keys.closure.cache_clear()
    store = Store(tmp_path / "out")
    parts = {"kernel": {"closure": dict(keys.closure("incpkg.kern"))}, "settings": {"seed": 0}}
    first = incremental.plan(store, "verify", "op/k", parts)
    assert not first.reused and first.reason == "no saved verdict"
    incremental.remember(store, "verify", "op/k", first, {"records": []})
    again = incremental.plan(store, "verify", "op/k", parts)
    assert again.reused and again.describe().startswith("reused (verdict of ")
    (pkg / "kern.py").write_text("from incpkg.helper import block\n\ndef kernel(x):\n    return x + block()\n")
    keys.closure.cache_clear()
    changed = {"kernel": {"closure": dict(keys.closure("incpkg.kern"))}, "settings": {"seed": 0}}
    after = incremental.plan(store, "verify", "op/k", changed)
    assert not after.reused and after.describe().startswith("rerun: ") and "kern.py changed" in after.reason
    other_seed = incremental.plan(store, "verify", "op/k", {**parts, "settings": {"seed": 1}})
    assert not other_seed.reused and other_seed.reason == "the settings changed"
    assert not incremental.plan(Store(tmp_path / "out", reuse=False), "verify", "op/k", parts).reused


def _verify(plugin, out, *extra):
    run = subprocess.run(
        [sys.executable, "-m", "harness", "verify", "--backend", "interpreter", "--plugin", str(plugin),
         "--select", "torch_rms_inc", "--max-examples", "2", "--no-render", "--jobs", "1",
         "--report-dir", str(out), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (kernel,) = json.loads((out / "verify.json").read_text())["kernels"]
    return run.stdout, kernel


def test_verify_reuses_an_unchanged_kernel_and_reruns_a_changed_one(tmp_path):
    plugin = tmp_path / "torch_rms_inc.py"
    plugin.write_text(PLUGIN)
    out = tmp_path / "out"
    console, first = _verify(plugin, out)
    assert "rerun: no saved verdict" in console and "reused" not in first and first["passed"]
    console, second = _verify(plugin, out)
    assert "reused (verdict of " in console
    assert second["reused"]["key"] and second["reused"]["saved_at"]
    assert (second["cases"], second["checks"], second["verdict"]) == (first["cases"], first["checks"], first["verdict"])
    plugin.write_text(PLUGIN + "\n# one more line\n")
    console, third = _verify(plugin, out)
    assert "reused" not in third and f"rerun: {plugin.resolve()} changed" in console
    console, fourth = _verify(plugin, out, "--no-cache")
    assert "reused" not in fourth and "rerun: --no-cache" in console


def test_a_kernel_that_finished_is_kept_when_the_run_is_killed_later(tmp_path):
    # bug class: verdicts saved only once every kernel has ended, so a run killed by a CI limit
    # (SIGKILL: no handler runs, no report) keeps nothing and the next run starts from zero
    plugin = tmp_path / "torch_rms_inc.py"
    plugin.write_text(PLUGIN + STUCK)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "verify", "--backend", "interpreter", "--plugin", str(plugin),
         "--select", "torch_rms_*", "--max-examples", "2", "--no-render", "--jobs", "2",
         "--report-dir", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if "rmsnorm/torch_rms_inc:" in line and ", ok" in line:
                break
    finally:
        # the CLI process (the launcher's child, a process group of its own) killed hard; its
        # workers die with it (no orphan holds the report folder)
        for child in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split():
            os.killpg(int(child), signal.SIGKILL)
        rest = proc.stdout.read()  # end of file: nothing that wrote to it is left
        proc.wait(timeout=60)
    assert any(", ok" in line for line in seen), "".join(seen + [rest])[-2000:]
    assert proc.returncode == 3 and not (out / "verify.json").exists()  # no verdict, no report
    console, kernel = _verify(plugin, out)
    assert "torch_rms_inc: reused (verdict of " in console and kernel["reused"] and kernel["passed"]


STUCK = """
import time

@register_kernel("rmsnorm", name="torch_rms_stuck")
def torch_rms_stuck(x, gamma, eps):
    time.sleep(3600)
"""


CASE = "rmsnorm:M=17,N=257,dtype=float32,layout=contiguous,values=tiny,eps=1e-12,seed=1002"


def _mutate(out, *extra):
    run = subprocess.run(
        [sys.executable, "-m", "harness", "mutate", "--backend", "interpreter", "--case", CASE,
         "--select", "cat.r_squared", "--jobs", "2", "--report-dir", str(out), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return run.stdout, json.loads((out / "mutation.json").read_text())


def test_mutate_reuses_the_sanity_step_and_each_mutant_outcome(tmp_path):
    out = tmp_path / "out"
    console, first = _mutate(out)
    assert "sanity step of rmsnorm: rerun" in console and "reused_from" not in first["sanity"]
    console, second = _mutate(out)
    assert "sanity step of rmsnorm: reused (verdict of " in console and second["sanity"]["reused_from"]
    (m1,), (m2,) = first["mutants"], second["mutants"]
    assert m2["reused_from"] and (m2["status"], m2["killed_by"]) == (m1["status"], m1["killed_by"]) == ("killed", m1["killed_by"])
    assert second["passed"] and second["score"] == first["score"]
    console, third = _mutate(out, "--no-cache")
    assert "reused_from" not in third["mutants"][0] and "reused_from" not in third["sanity"]


def test_a_plugins_contract_and_file_are_in_its_kernels_key(tmp_path):
    # bug class: a plugin that registers a function of another module (its contract in the plugin
    # file) keeping its verdict after the contract or the plugin changed
    import dataclasses

    import torch

    from harness.incremental import plan as incremental
    from harness.registry.registry import REGISTRY, Contract

    plugin = tmp_path / "contract_plugin.py"
    plugin.write_text("import torch\nfrom harness import register_kernel, Contract\n"
                      "register_kernel('rmsnorm', name='inc_contract_k', contract=Contract(dtypes=(torch.float32,)))"
                      "(torch.nn.functional.rms_norm)\n")
    from harness.registry import loader

    loader.load_plugin(str(plugin))
    entry = REGISTRY.entries.pop(("rmsnorm", "inc_contract_k"))  # out of the registry other tests of this process see
    spec = REGISTRY.op("rmsnorm")

    def key(e):
        keys.closure.cache_clear()
        return keys.digest(incremental.kernel_parts(e, spec, backend="interpreter", device="cpu", settings={}))

    first = key(entry)
    assert key(dataclasses.replace(entry, contract=Contract(dtypes=(torch.float32, torch.float16)))) != first
    assert loader.module_name(str(plugin)) in incremental.entry_closure(entry)
    plugin.write_text(plugin.read_text() + "# edited\n")
    assert key(entry) != first


def test_a_batch_of_saved_outcomes_rewrites_the_manifest_once(tmp_path, monkeypatch):
    # bug class: one manifest rewrite per saved outcome (quadratic: minutes at the end of a campaign),
    # or files saved by an interrupted batch left out of the manifest (make clean would keep them)
    from reports import manifest

    from harness.incremental.store import Store

    saves = []
    real = manifest._save
    monkeypatch.setattr(manifest, "_save", lambda d, data: (saves.append(len(data["files"])), real(d, data)))
    store = Store(tmp_path)
    with store.batch():
        for i in range(50):
            store.put("mutant", f"k{i}", {"status": "killed"}, {})
        assert not saves
    assert saves == [50]
    try:
        with store.batch():
            store.put("mutant", "late", {"status": "killed"}, {})
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert manifest.owns(store.folder, "mutant-late.json") and "mutant-late.json" in manifest.read(store.folder)["files"]
    assert store.get("mutant", "k7")["payload"] == {"status": "killed"}


def test_an_interrupted_campaign_keeps_only_its_final_outcomes(tmp_path):
    # bug class: a survivor of an interrupted campaign saved before its memcheck / floor second
    # looks (a later run would reuse "survived" without them), or a crash (load-dependent) kept
    from harness.incremental import mutants as reuse
    from harness.mutation.outcome import Outcome, Status
    from harness.registry.registry import Contract, KernelEntry

    store = Store(tmp_path)
    statuses = {"k": Status.KILLED, "i": Status.INCOMPETENT, "s": Status.SURVIVED, "c": Status.CRASHED,
                "t": Status.TIMEOUT}
    outcomes = [Outcome(KernelEntry("rmsnorm", name, lambda: None, Contract(), "mutant", "generated", "here"), status)
                for name, status in statuses.items()]
    # plans by <op>/<name> (harness.mutation.outcome.ident)
    plans = {f"rmsnorm/{name}": incremental.plan(store, incremental.MUTANT, f"rmsnorm/{name}", {"mutant": name})
             for name in statuses}
    reuse.save(store, plans, outcomes, partial=True)
    kept = {name for name in statuses if store.get(incremental.MUTANT, plans[f"rmsnorm/{name}"].key) is not None}
    assert kept == {"k", "i"}
    reuse.save(store, plans, outcomes)  # a complete campaign keeps its survivors too
    kept = {name for name in statuses if store.get(incremental.MUTANT, plans[f"rmsnorm/{name}"].key) is not None}
    assert kept == {"k", "i", "s"}


def test_the_sanity_steps_clean_run_leaves_out_the_cases_a_current_verify_verdict_passed(tmp_path):
    # the gate runs verify, then the campaign, whose sanity step ran every clean kernel over the same
    # cases again; now it runs only the cases verify did not pass, and still judges the clean kernel
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "harness", "verify", "--backend", "interpreter", "--op", "rmsnorm", "--case", CASE,
         "--no-render", "--jobs", "1", "--report-dir", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    console, report = _mutate(out)
    assert "clean run of triton_rmsnorm: 1 case(s) passed in verify (verdict of " in console
    (clean,) = [r for r in report["sanity"]["runs"] if r["role"] == "clean"]
    assert (clean["cases"], clean["passed_in_verify"], clean["passed"]) == (0, 1, True)
    assert report["sanity"]["clean_seconds"]["rmsnorm"] >= clean["verify_seconds"] > 0
    (forced,) = [r for r in report["sanity"]["runs"] if r["role"] == "forced_failure"]
    assert not forced["passed"] and forced["cases"] == 1  # the forced failure still runs
    (m,) = report["mutants"]
    assert m["status"] == "killed" and report["passed"]
    console, report = _mutate(tmp_path / "elsewhere")  # no verify verdict there: the clean run runs its case
    (clean,) = [r for r in report["sanity"]["runs"] if r["role"] == "clean"]
    assert (clean["cases"], clean["passed_in_verify"]) == (1, 0) and "passed in verify" not in console


def test_verified_cases_are_the_passed_cases_of_a_current_verdict_only(tmp_path, monkeypatch):
    from harness.registry import loader
    from harness.registry.registry import REGISTRY

    plugin = tmp_path / "torch_rms_inc.py"
    plugin.write_text(PLUGIN)
    out = tmp_path / "out"
    _verify(plugin, out)
    ids = {c["case_id"] for c in json.loads((out / "verify.json").read_text())["cases"]}
    loader.load_plugin(str(plugin))
    entry = REGISTRY.get("rmsnorm", "torch_rms_inc")
    cases, seconds, saved_at = incremental.verified_cases(entry, Store(out), backend="interpreter")
    assert cases == ids and len(ids) > 10 and seconds > 0 and saved_at
    assert incremental.verified_cases(entry, Store(out, reuse=False), backend="interpreter") is None  # --no-cache
    plugin.write_text(PLUGIN + "\n# one more line\n")  # the kernel changed since: nothing is known of it
    keys.closure.cache_clear()  # (one closure per module and process: a process of the next run sees the change)
    assert incremental.verified_cases(entry, Store(out), backend="interpreter") is None


def test_a_verdict_with_cases_the_judge_could_not_run_is_not_reused(tmp_path):
    """An inconclusive case (out of GPU memory held by other processes) asks to be run again: the
    saved verdict holding it is run again, while a verdict without one is reused."""
    store = Store(tmp_path / "out")
    parts = {"kernel": {"closure": {}}, "settings": {"seed": 0}}
    first = incremental.plan(store, "verify", "op/k", parts)
    stuck = {"case_id": "op:N=5,layout=index_width_rows", "passed": True, "inconclusive": "out of GPU memory"}
    incremental.remember(store, "verify", "op/k", first, {"records": [{"case_id": "op:N=1", "passed": True}, stuck]})
    again = incremental.unless_inconclusive(incremental.plan(store, "verify", "op/k", parts))
    assert not again.reused
    assert "1 case(s) the judge could not run" in again.reason and "index_width_rows" in again.reason
    incremental.remember(store, "verify", "op/k", first, {"records": [{"case_id": "op:N=1", "passed": True}]})
    clean = incremental.unless_inconclusive(incremental.plan(store, "verify", "op/k", parts))
    assert clean.reused
