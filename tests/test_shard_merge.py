"""CI matrices: `verify --shard I/K` and `mutate --shard I/K` split a run over K jobs, and
`report --merge` joins their reports into the unsharded run's, case for case and mutant for mutant."""

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from floors import rmsnorm_floor
from harness.cases.shard import in_part
from harness.cli.common import shard_arg

ROOT = Path(__file__).resolve().parent.parent
K = 3

# a torch-only RMSNorm (no Triton): the split does not depend on the kernel, and this one is fast
PLUGIN = '''
import torch
from harness import register_kernel

@register_kernel("rmsnorm", name="torch_rms")
def torch_rms(x, gamma, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()).to(x.dtype)
'''
CASE = "rmsnorm:M=17,N=257,dtype=float32,layout=contiguous,values=tiny,eps=1e-12,seed=1002"
# killed by different checks, plus cat.x_assumed_contiguous, which this one contiguous case cannot see
MUTANTS = "cat.block_divisor_forward,cat.dgamma_mean,cat.r_squared,cat.mask_off_by_one,cat.x_assumed_contiguous,cat.eps_outside_sqrt"


def _harness(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _parts_and_whole(tmp_path, command: list[str]) -> tuple[list[subprocess.CompletedProcess], subprocess.CompletedProcess]:
    runs = [[*command, "--report-dir", str(tmp_path / f"part{i}"), "--shard", f"{i}/{K}"] for i in range(K)]
    runs.append([*command, "--report-dir", str(tmp_path / "whole")])
    with ThreadPoolExecutor(2) as pool:  # 2 cores: two runs at a time
        done = list(pool.map(lambda a: _harness(*a), runs))
    return done[:K], done[K]


def _merge(tmp_path):
    return _harness("report", "--merge", *(str(tmp_path / f"part{i}") for i in range(K)), "--report-dir", str(tmp_path / "merged"))


def test_shard_argument_and_mutant_split():
    assert shard_arg("2/3") == (2, 3)
    for bad in ("3/3", "-1/3", "1", "a/b", "0/0"):
        with pytest.raises(Exception, match="I/K"):
            shard_arg(bad)
    names = [f"gen.m{i}" for i in range(60)]
    parts = [[n for n in names if in_part(n, (i, K))] for i in range(K)]
    assert sorted(sum(parts, [])) == sorted(names) and all(parts)  # each name in exactly one part


@pytest.mark.slow
def test_verify_parts_merge_into_the_unsharded_run(tmp_path):
    plugin = tmp_path / "torch_rms.py"
    plugin.write_text(PLUGIN)
    parts, whole = _parts_and_whole(tmp_path, ["verify", "--backend", "interpreter", "--plugin", str(plugin),
                                               "--select", "torch_rms", "--max-examples", "4", "--no-render", "--jobs", "1"])
    assert all(p.returncode == 0 for p in parts) and whole.returncode == 0, [p.stderr[-2000:] for p in (*parts, whole)]
    merged = _merge(tmp_path)
    assert merged.returncode == 0, merged.stderr
    load = lambda d: json.loads((tmp_path / d / "verify.json").read_text())
    key = lambda report: sorted((r["case_id"], r["check"], r["passed"]) for r in report["cases"])
    part_keys = [set(key(load(f"part{i}"))) for i in range(K)]
    assert all(part_keys) and not (part_keys[0] & part_keys[1]) and not (part_keys[1] & part_keys[2])
    whole_report, merged_report = load("whole"), load("merged")
    assert key(merged_report) == key(whole_report)  # case for case
    (wk,), (mk,) = whole_report["kernels"], merged_report["kernels"]
    assert (mk["passed"], mk["cases"], mk["failed"], mk["checks"]) == (wk["passed"], wk["cases"], wk["failed"], wk["checks"])
    assert wk["cases"] == len(rmsnorm_floor()) + 4  # the floor and the generated cases, all of them
    assert (tmp_path / "merged" / "index.html").is_file()


@pytest.mark.slow
def test_mutate_parts_merge_into_the_unsharded_campaign(tmp_path):
    parts, whole = _parts_and_whole(tmp_path, ["mutate", "--backend", "interpreter", "--op", "rmsnorm", "--select", MUTANTS,
                                               "--case", CASE, "--kill-cache", "none", "--jobs", "1"])
    assert whole.returncode == 1 and all(p.returncode in (0, 1) for p in parts), [p.stderr[-2000:] for p in (*parts, whole)]
    load = lambda d: json.loads((tmp_path / d / "mutation.json").read_text())
    for i in range(K):
        assert load(f"part{i}")["sanity"]["runs"], "every part runs the sanity step"
    merged = _merge(tmp_path)
    assert merged.returncode == 1  # the survivor fails the merged gate, as it fails the whole campaign
    key = lambda report: sorted((m["name"], m["status"], (m["killed_by"] or {}).get("check")) for m in report["mutants"])
    whole_report, merged_report = load("whole"), load("merged")
    assert key(merged_report) == key(whole_report) and len(key(whole_report)) == 6  # mutant for mutant
    assert (merged_report["score"], merged_report["counts"]) == (whole_report["score"], whole_report["counts"])
    assert [m["name"] for m in merged_report["mutants"] if m["status"] == "survived"] == ["cat.x_assumed_contiguous"]


def test_merge_refuses_a_missing_part(tmp_path):
    for i in (0, 2):
        (tmp_path / f"part{i}").mkdir()
        (tmp_path / f"part{i}" / "verify.json").write_text(json.dumps(
            {"backend": "interpreter", "seed": 0, "max_examples": 4, "shard": {"index": i, "count": 3}, "kernels": [], "cases": []}))
    proc = _harness("report", "--merge", str(tmp_path / "part0"), str(tmp_path / "part2"), "--report-dir", str(tmp_path / "m"))
    assert proc.returncode == 2 and "missing part(s) 1/3" in proc.stderr and "Traceback" not in proc.stderr
