"""verify --baseline REV: the kernels of another revision beside the working tree's.

Bug classes targeted: a rounding change reported as identical (a false "no drift"), a comment
reported as drift, NaN or -0.0 miscounted in ulps, a limit (--require-bitwise) that does not
fail the run, a renamed kernel reported as added + removed, the temporary worktree left behind.
The end-to-end tests run the harness of a temporary clone (with this working tree's code) on
one case of triton_rmsnorm, under the interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from harness.baseline.drift import output_drift
from harness.baseline.session import pair
from reports import drift

ROOT = Path(__file__).resolve().parents[1]
CASE = "rmsnorm:M=17,N=257,dtype=float32,layout=contiguous,values=tiny,eps=1e-12,seed=1002"
FORWARD = "    y = x * rstd[:, None] * g[None, :]\n"
REORDERED = "    y = x * (rstd[:, None] * g[None, :])\n"
CODE = ("harness", "reports", "properties", "oracles", "kernels")


# --- ulps ------------------------------------------------------------------------------
def test_ulps_count_representable_values_between():
    one = torch.tensor([1.0, 2.0])
    assert output_drift(one, one) == {"identical": True, "max_ulps": 0}
    up = torch.nextafter(one, torch.full_like(one, 10.0))
    assert output_drift(one, up) == {"identical": False, "max_ulps": 1}
    tiny = torch.tensor([-1e-45]), torch.tensor([1e-45])  # the two smallest subnormals around zero
    assert output_drift(*tiny)["max_ulps"] == 2
    half = torch.ones(3, dtype=torch.float16)
    assert output_drift(half, half * 1.001)["max_ulps"] == 1


def test_nan_at_the_same_place_is_identical_and_signed_zero_is_not():
    a = torch.tensor([1.0, float("nan")])
    assert output_drift(a, a.clone())["identical"]
    assert output_drift(torch.tensor([0.0]), torch.tensor([-0.0])) == {"identical": False, "max_ulps": 0}
    assert output_drift(a, torch.tensor([1.0, 3.0]))["max_ulps"] > 1_000_000  # NaN against a number: far
    assert output_drift(a, torch.ones(3))["max_ulps"] is None  # shapes differ: not comparable


# --- pairing and the summary ------------------------------------------------------------
def _entry(op, name, fn_name, module="kernels.rmsnorm"):
    fn = lambda: None  # noqa: E731
    fn.__name__, fn.__module__ = fn_name, module
    return SimpleNamespace(op=op, name=name, fn=fn)


def test_pairs_by_name_then_by_module_and_function():
    head = [_entry("rmsnorm", "triton_rmsnorm", "rmsnorm"), _entry("rmsnorm", "fast", "rmsnorm_v2"),
            _entry("softmax", "new_softmax", "softmax", "kernels.softmax")]
    base = [_entry("rmsnorm", "base:triton_rmsnorm", "rmsnorm", "_baseline_kernels.rmsnorm"),
            _entry("rmsnorm", "base:quick", "rmsnorm_v2", "_baseline_kernels.rmsnorm"),
            _entry("swiglu", "base:old_swiglu", "swiglu", "_baseline_kernels.swiglu")]
    plan = pair(head, base)
    assert plan["pairs"] == {("rmsnorm", "triton_rmsnorm"): "base:triton_rmsnorm", ("rmsnorm", "fast"): "base:quick"}
    assert plan["renamed"] == [{"op": "rmsnorm", "from": "quick", "to": "fast"}]
    assert plan["added"] == [{"op": "softmax", "name": "new_softmax"}]
    assert plan["removed"] == [{"op": "swiglu", "name": "old_swiglu"}]


def _rec(case, check, identical, ulps, base, head):
    return {"op": "rmsnorm", "kernel": "k", "case_id": case, "check": check,
            "baseline": {"identical": identical, "max_ulps": ulps, "share_base": base, "share_head": head}}


def test_summary_counts_cases_and_limits_fail_with_a_reason():
    records = [_rec("c1", "forward", True, 0, 0.1, 0.1), _rec("c1", "dx", False, 3, 0.1, 0.4),
               _rec("c2", "forward", True, 0, 0.2, 0.2), {"op": "rmsnorm", "kernel": "k", "case_id": "c2", "check": "contract"}]
    summary = drift.summarize({"rev": "main"}, [{"op": "rmsnorm", "name": "k"}], records)
    (k,) = summary["kernels"]
    assert (k["cases"], k["identical"], k["changed"], k["max_ulps"]) == (2, 1, 1, 3)
    assert (k["worst_share_base"], k["worst_share_head"]) == (0.2, 0.4)
    assert k["grew_most"][0]["case_id"] == "c1"
    assert drift.limit_failures(summary, max_ulps=None, bitwise=False) == []
    assert drift.limit_failures(summary, max_ulps=3, bitwise=False) == []
    assert "more than --max-drift-ulps 2" in drift.limit_failures(summary, max_ulps=2, bitwise=False)[0]
    assert "differ bitwise from main" in drift.limit_failures(summary, max_ulps=None, bitwise=True)[0]
    assert "| rmsnorm/k | 2 | 1 | 1 | 3 |" in "\n".join(drift.markdown_lines(summary))


# --- end to end: a temporary clone with a rounding change, then a comment -----------------
def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=test", "-c", "user.email=test@example.com", *args],
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("baseline") / "tmp"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(tmp)], check=True)
    for name in CODE:  # this working tree's code, committed or not, is what is tested
        shutil.rmtree(tmp / name)
        shutil.copytree(ROOT / name, tmp / name, ignore=shutil.ignore_patterns("__pycache__", "out"))
    _git(tmp, "checkout", "-q", "-b", "drift")
    _git(tmp, "add", "-A", *CODE)
    _git(tmp, "commit", "-q", "--allow-empty", "-m", "the working tree")
    return tmp


def _verify(repo: Path, report: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(repo))
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run(
        [sys.executable, "-m", "harness", "verify", "--baseline", "HEAD~1", "--select", "triton_rmsnorm",
         "--max-examples", "2", "--case", CASE, "--backend", "interpreter", "--report-dir", str(report), "--no-render",
         *extra], cwd=repo, env=env, capture_output=True, text=True, timeout=900)


def _commit_edit(repo: Path, old: str, new: str, message: str) -> None:
    path = repo / "kernels" / "rmsnorm.py"
    text = path.read_text()
    assert old in text, "the line the test edits is gone from kernels/rmsnorm.py"
    path.write_text(text.replace(old, new, 1))
    _git(repo, "commit", "-q", "-am", message)


def test_a_rounding_change_is_reported_and_fails_require_bitwise(clone, tmp_path):
    _commit_edit(clone, FORWARD, REORDERED, "rmsnorm: x * (r * g)")
    proc = _verify(clone, tmp_path, "--require-bitwise")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "drift limit: rmsnorm/triton_rmsnorm: 1 of 1 case(s) differ bitwise from HEAD~1" in proc.stderr
    report = json.loads((tmp_path / "verify.json").read_text())
    assert report["passed"], "drift is not an oracle failure"
    (k,) = report["baseline"]["kernels"]
    assert (k["op"], k["name"], k["cases"], k["identical"], k["changed"]) == ("rmsnorm", "triton_rmsnorm", 1, 0, 1)
    assert k["max_ulps"] >= 1 and k["changed_cases"][0]["case_id"] == CASE
    forward = next(r for r in report["cases"] if r["check"] == "forward")
    assert forward["baseline"]["identical"] is False and forward["baseline"]["max_ulps"] >= 1
    assert "changed: " + CASE in proc.stdout
    assert _git(clone, "worktree", "list").count("\n") == 1, "the base worktree was not removed"


def test_a_comment_is_bitwise_identical(clone, tmp_path):
    text = (clone / "kernels" / "rmsnorm.py").read_text()
    _commit_edit(clone, text, text + "# a comment: the same numbers\n", "rmsnorm: a comment")
    proc = _verify(clone, tmp_path, "--require-bitwise")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "verify.json").read_text())
    (k,) = report["baseline"]["kernels"]
    assert (k["cases"], k["identical"], k["changed"], k["max_ulps"]) == (1, 1, 0, 0)
    values = [r for r in report["cases"] if r.get("baseline")]
    assert values and all(r["baseline"]["identical"] for r in values)
    assert {r["check"] for r in values} >= {"forward", "dx", "dgamma"}


# --- a plugin's own repository: REV is a revision of the repository the plugin file lives in ----
PLUGIN = '''import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from harness import register_kernel  # noqa: E402
from mylib.ops import rmsnorm  # noqa: E402  (the library's module of this revision)

register_kernel("rmsnorm", name="my_rmsnorm")(rmsnorm)
'''
OPS = '''import torch


def rmsnorm(x, gamma, eps):
    xf = x.float()
    r = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return {expr}.to(x.dtype)
'''


def test_a_plugin_is_compared_with_its_own_repositorys_revision(tmp_path):
    # bug classes: the base plugin importing the head's library (a false "identical"), a plugin's
    # revision looked up in the harness's repository
    repo, report = tmp_path / "mylib_repo", tmp_path / "report"
    (repo / "mylib").mkdir(parents=True)
    (repo / "mylib" / "__init__.py").write_text("")
    (repo / "plugin.py").write_text(PLUGIN)
    (repo / "mylib" / "ops.py").write_text(OPS.format(expr="(xf * r) * gamma.float()"))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "rmsnorm")
    (repo / "mylib" / "ops.py").write_text(OPS.format(expr="xf * (r * gamma.float())"))
    _git(repo, "commit", "-q", "-am", "rmsnorm: x * (r * g)")
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "verify", "--plugin", str(repo / "plugin.py"), "--baseline", "HEAD~1",
         "--select", "my_rmsnorm", "--case", CASE, "--backend", "interpreter", "--report-dir", str(report),
         "--no-render"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    baseline = json.loads((report / "verify.json").read_text())["baseline"]
    (k,) = baseline["kernels"]
    assert (k["name"], k["cases"], k["changed"]) == ("my_rmsnorm", 1, 1) and k["max_ulps"] >= 1, baseline
    assert str(repo) in [r["path"] for r in baseline["repositories"]]
    assert _git(repo, "worktree", "list").count("\n") == 1, "the base worktree was not removed"
    assert (repo / "mylib" / "ops.py").read_text() == OPS.format(expr="xf * (r * gamma.float())"), "the checkout moved"


def test_a_plugin_outside_any_repository_is_a_usage_error(tmp_path):
    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "__init__.py").write_text("")
    (tmp_path / "mylib" / "ops.py").write_text(OPS.format(expr="(xf * r) * gamma.float()"))
    (tmp_path / "plugin.py").write_text(PLUGIN)
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "verify", "--plugin", str(tmp_path / "plugin.py"), "--baseline", "HEAD",
         "--backend", "interpreter", "--report-dir", str(tmp_path / "r")], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=600)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "is not in a git repository" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_merge_of_shards_sums_up_the_drift_of_every_part():
    # bug class: the merged verify.json keeping the first part's drift (half the cases compared)
    from reports import merge

    def part(index, case, identical, ulps):
        records = [dict(_rec(case, "forward", identical, ulps, 0.1, 0.2), passed=True, kernel="k")]
        plan = {"rev": "main", "commit": "abc", "repositories": [], "added": [], "removed": [], "renamed": []}
        return (f"part{index}", {"shard": {"index": index, "count": 2}, "passed": True, "cases": records,
                                 "kernels": [{"op": "rmsnorm", "name": "k", "status": "ok", "passed": True, "cases": 1, "failed": 0}],
                                 "baseline": drift.summarize(plan, [{"op": "rmsnorm", "name": "k"}], records)})

    merged = merge.merge_verify([part(0, "c1", True, 0), part(1, "c2", False, 4)])
    (k,) = merged["baseline"]["kernels"]
    assert (k["cases"], k["identical"], k["changed"], k["max_ulps"]) == (2, 1, 1, 4)
    assert merged["baseline"]["rev"] == "main"
