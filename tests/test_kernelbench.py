"""KernelBench problems: ``verify --reference problem.py --candidate solution.py``, against
KernelBench's own correctness check, and ``harness.from_reference`` underneath it.

KernelBench calls a candidate correct when five sets of torch.randn inputs at the problem's one
shape give outputs torch.allclose to Model's with atol = rtol = 1e-2, forward only, in fp32.
Each wrong candidate here passes that check (``kernelbench_check``, written as KernelBench does
it) and fails ours, on the case kind that its bug needs: a row of large logits (softmax without
the max subtracted), any case at all (layer norm with the unbiased variance: 0.8% off is inside
1e-2, far outside fp32 rounding), another shape (a row mean dropping the last partial block),
a non-contiguous view (Swish reading memory as one flat array). The right candidates pass both.

Bug classes: a candidate verified on the problem's shape and contiguous randn inputs only; a
tolerance loose enough to pass a systematic error; a bad problem or candidate file that ends in
a traceback wall instead of one line; repros that do not re-run the case.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.registry.registry import Contract, KernelEntry
from harness.run.runner import run_case

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = "tests/fixtures/kernelbench"

# (problem, wrong candidate, what a failing case of it must show)
WRONG = [
    ("softmax_problem", "softmax_naive", lambda case: _param(case, "values") != "normal"),
    ("layernorm_problem", "layernorm_unbiased", lambda case: True),
    ("rowmean_problem", "rowmean_tail", lambda case: int(_param(case, "x_1")) % 64 != 0),
    ("swish_problem", "swish_strides", lambda case: _param(case, "layout") != "contiguous"),
]
RIGHT = [("softmax_problem", "softmax_torch"), ("layernorm_problem", "layernorm_torch"), ("swish_problem", "swish_torch")]


def _param(case_id: str, key: str) -> str:
    return dict(p.split("=", 1) for p in case_id.split(":", 1)[1].split(","))[key]


def kernelbench_check(problem: str, candidate: str, trials: int = 5, seed: int = 42) -> bool:
    """KernelBench's correctness check (scripts/kernelbench_check.py, written as src/eval.py's
    run_and_check_correctness): same-seeded Model and ModelNew, ``trials`` seeded get_inputs(),
    forward only, same shape and torch.allclose(atol=rtol=1e-2)."""
    spec = importlib.util.spec_from_file_location("kernelbench_check", ROOT / "scripts" / "kernelbench_check.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script.check(f"{FIXTURES}/{problem}.py", f"{FIXTURES}/{candidate}.py", trials, seed)[0]


def harness(*args, timeout=600):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def verify(problem: str, candidate: str, report: Path, *more: str):
    return harness("verify", "--reference", f"{FIXTURES}/{problem}.py", "--candidate", f"{FIXTURES}/{candidate}.py",
                   "--backend", "interpreter", "--report-dir", str(report), *more)


@pytest.mark.parametrize("problem, candidate", [w[:2] for w in WRONG] + RIGHT)
def test_kernelbench_check_passes_every_candidate_here(problem, candidate):
    assert kernelbench_check(problem, candidate), f"{candidate} should pass KernelBench's own check"


@pytest.mark.parametrize("problem, candidate, shows", WRONG, ids=[w[1] for w in WRONG])
def test_each_wrong_candidate_fails_ours_with_repros(problem, candidate, shows, tmp_path):
    proc = verify(problem, candidate, tmp_path, "--max-examples", "5")  # the floor, then 5 generated cases
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr
    report = json.loads((tmp_path / "verify.json").read_text())
    (kernel,) = report["kernels"]
    assert kernel["name"] == candidate and not kernel["passed"] and kernel["checks"]["forward"]["failed"] > 0
    assert kernel["verdict"] == "fail" and kernel["forward_only"] is True  # forward only, and wrong: FAIL
    failed = [r for r in report["cases"] if not r["passed"]]
    assert failed and all(r["op"] == f"kb_{problem}" for r in failed)
    forward = [r["case_id"] for r in failed if r["check"] == "forward"]
    assert all(shows(c) for c in forward), sorted(c for c in forward if not shows(c))
    from harness.cases.command import console_words

    start = list(console_words())  # the console script by full path (harness.cases.command)
    for r in failed:
        words = shlex.split(r["repro"])
        assert words[:len(start) + 1] == [*start, "verify"] and "--plugin" not in words, r["repro"]
        assert words[words.index("--reference") + 1] == str(ROOT / FIXTURES / f"{problem}.py")
        assert words[words.index("--candidate") + 1] == str(ROOT / FIXTURES / f"{candidate}.py")
        assert words[words.index("--case") + 1] == r["case_id"]
    if candidate == "swish_strides":  # a repro re-runs exactly its case, and fails again
        words = shlex.split(failed[0]["repro"])[len(start):]
        again = harness(*words, "--report-dir", str(tmp_path / "again"))
        assert again.returncode == 1, again.stderr
        rerun = json.loads((tmp_path / "again" / "verify.json").read_text())
        assert {r["case_id"] for r in rerun["cases"]} == {failed[0]["case_id"]}


@pytest.mark.parametrize("problem, candidate", RIGHT[:2])
def test_a_right_candidate_passes_ours(problem, candidate, tmp_path):
    proc = verify(problem, candidate, tmp_path, "--low-precision")  # fp16 and bf16 cases too (opt-in)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    report = json.loads((tmp_path / "verify.json").read_text())
    cases = {r["case_id"] for r in report["cases"]}
    # the problem's shape, other shapes where the model allows them, layouts and dtypes
    assert f"kb_{problem}:x_0=" in min(cases) and len({_param(c, "x_0") for c in cases}) > 1
    assert {_param(c, "dtype") for c in cases} >= {"float32", "float16", "bfloat16"}
    assert len({_param(c, "layout") for c in cases}) > 1
    if problem == "layernorm_problem":  # nn.LayerNorm(64)'s weights fix the feature dim
        assert {_param(c, "x_1") for c in cases} == {"64"}
    # only the forward is checked: the verdict says so (it said PASS, as if gradients had been checked)
    (kernel,) = report["kernels"]
    assert kernel["forward_only"] is True and kernel["verdict"] == "pass (forward only)"
    assert "PASS (forward only)" in proc.stdout, proc.stdout[-2000:]
    assert len(report["pinned"]["reference"]["sha256"]) == 64 and "tampered" not in report
    assert not {r["check"] for r in report["cases"]} & {"dx", "changed_input"}


def test_a_candidate_that_raises_is_a_failing_verdict(tmp_path):
    proc = verify("softmax_problem", "raises_forward", tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    (kernel,) = json.loads((tmp_path / "verify.json").read_text())["kernels"]
    assert not kernel["passed"]


@pytest.mark.parametrize("reference, candidate, words", [
    ("nope.py", "softmax_torch.py", "--reference tests/fixtures/kernelbench/nope.py: file not found"),
    ("softmax_problem.py", "nope.py", "--candidate tests/fixtures/kernelbench/nope.py: file not found"),
    ("softmax_torch.py", "softmax_torch.py", "defines no Model"),
    ("softmax_problem.py", "softmax_problem.py", "defines no ModelNew"),
    ("softmax_problem.py", "raises_init.py", "ModelNew(*get_init_inputs()) raised ValueError: bad constructor arguments"),
    ("softmax_problem.py", None, "--reference and --candidate go together"),
])
def test_bad_input_is_one_line_and_exit_2(reference, candidate, words, tmp_path):
    args = ["verify", "--reference", f"{FIXTURES}/{reference}", "--backend", "interpreter", "--report-dir", str(tmp_path)]
    if candidate:
        args += ["--candidate", f"{FIXTURES}/{candidate}"]
    proc = harness(*args)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# --- Triton candidates: the interpreter runs one case each ----------------------------------

@pytest.mark.parametrize("problem, candidate, case, passed", [
    ("rowmean_problem", "rowmean_triton", "x_0=8,x_1=257,dtype=float32,layout=contiguous,values=normal,seed=1", True),
    ("rowmean_problem", "rowmean_triton_tail", "x_0=8,x_1=257,dtype=float32,layout=contiguous,values=normal,seed=1", False),
    ("swish_problem", "swish_flat", "x_0=8,x_1=512,dtype=float32,layout=transposed,values=normal,seed=1", False),
])
def test_triton_candidates_on_the_case_their_bug_needs(problem, candidate, case, passed, tmp_path):
    assert kernelbench_check(problem, candidate)
    proc = verify(problem, candidate, tmp_path, "--case", f"kb_{problem}:{case}")
    assert proc.returncode == (0 if passed else 1), proc.stdout[-3000:] + proc.stderr


# --- harness.from_reference ------------------------------------------------------------------

def test_from_reference_ties_dims_and_derives_the_rounding_model():
    import harness

    op = harness.from_reference(lambda a, b: a @ b, (torch.randn(8, 40), torch.randn(40, 24)),
                                vary={"a": ("M", "K"), "b": ("K", None)}, name="ref_matmul", register=False)
    assert op.varying == ("M", "K") and op.decl.signature == "f(a[M, K], b[K, b_1]) -> y[M, 24]"
    cases = [c for c in op.floor_cases(backend="interpreter")
             if c["M"] * c["K"] <= 4096 and c["layout"] in ("contiguous", "transposed")][:24]
    assert all(c["b_1"] == 24 for c in cases) and len({c["K"] for c in cases}) > 1

    def fp32_accumulation(a, b):
        return (a.float() @ b.float()).to(a.dtype)

    def low_precision_accumulation(a, b):  # every partial sum rounded to the inputs' dtype
        acc = torch.zeros(a.shape[0], b.shape[1], dtype=a.dtype)
        for k in range(a.shape[1]):
            acc = acc + a[:, k:k + 1] * b[k]
        return acc

    def failed(fn):
        entry = KernelEntry(op.name, fn.__name__, fn, Contract(), "kernel", "plugin", __file__)
        return {c.id for c in cases if any(not r.passed for r in run_case(
            op, entry, c, backend="interpreter", device="cpu").records)}

    assert failed(fp32_accumulation) == set()
    bad = failed(low_precision_accumulation)
    assert bad and all(_param(c, "dtype") != "float32" for c in bad), sorted(bad)


def test_from_reference_differentiable_op_judges_gradients_and_forward_only_kernels():
    """A from_reference op's upstream gradient has the output's shape (read from the reference),
    so its gradients are judged and a forward-only kernel of it is judged on its forward."""
    import harness
    import torch.nn.functional as F

    op = harness.from_reference(lambda x, b: F.gelu(x + b, approximate="tanh"), (torch.randn(8, 300), torch.randn(300)),
                                vary={"x": ("M", "N"), "b": ("N",)}, name="ref_bias_gelu", register=False)
    cases = [c for c in op.floor_cases(backend="interpreter") if c["M"] * c["N"] <= 4096][:12]
    assert cases

    def right(x, b):
        return F.gelu(x.float() + b.float(), approximate="tanh").to(x.dtype)

    def exact_gelu(x, b):  # the erf gelu where the contract says tanh: 1e-3 off, far past rounding
        return F.gelu(x.float() + b.float()).to(x.dtype)

    def checks(fn, contract):
        out = {}
        for c in cases:
            for r in run_case(op, KernelEntry(op.name, fn.__name__, fn, contract, "kernel", "plugin", __file__), c,
                              backend="interpreter", device="cpu").records:
                out.setdefault(r.check, []).append(r.passed)
        return out

    full = checks(right, Contract())
    assert {"forward", "dx", "db"} <= set(full) and all(all(v) for v in full.values()), full
    forward_only = checks(right, Contract(forward_only=True))
    assert "forward" in forward_only and "dx" not in forward_only and all(all(v) for v in forward_only.values())
    wrong = checks(exact_gelu, Contract(forward_only=True))
    assert not all(wrong["forward"])

    class ErfBackward(torch.autograd.Function):  # the right forward, the erf gelu's derivative backward
        @staticmethod
        def forward(ctx, x, b):
            ctx.save_for_backward(x, b)
            return right(x, b)

        @staticmethod
        def backward(ctx, dy):
            x, b = ctx.saved_tensors
            with torch.enable_grad():
                z = (x.float() + b.float()).requires_grad_(True)
                (dz,) = torch.autograd.grad(F.gelu(z), z, dy.float())
            return dz.to(x.dtype), dz.sum(0).to(b.dtype)

    def wrong_backward(x, b):
        return ErfBackward.apply(x, b)

    bad = checks(wrong_backward, Contract())
    assert all(bad["forward"]) and not all(bad["dx"]) and not all(bad["db"])


def test_a_candidate_that_rewrites_the_problem_file_gets_no_verdict(tmp_path):
    """The inputs are read, hashed and copied once before any user code runs; every process loads
    the copy after checking its hash, and a file changed on disk during the run ends it as
    tampered (exit 3), never as a verdict (this candidate passed 74 cases before)."""
    import hashlib
    import shutil

    problem = tmp_path / "problem.py"
    shutil.copy(f"{FIXTURES}/softmax_problem.py", problem)
    digest = hashlib.sha256(problem.read_bytes()).hexdigest()
    proc = harness("verify", "--reference", str(problem), "--candidate", f"{FIXTURES}/hacks/rewrites_problem.py",
                   "--backend", "interpreter", "--report-dir", str(tmp_path / "out"), "--max-examples", "3")
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "tampered" in proc.stderr
    report = json.loads((tmp_path / "out" / "verify.json").read_text())
    # the candidate finds the file it rewrites through sys.modules (the pinned copy): no process that
    # runs it has the command line that names the original
    pinned = tmp_path / "out" / "kernelbench" / "pinned" / f"problem_{digest[:16]}.py"
    assert report["pinned"]["reference"]["sha256"] == digest and report["tampered"]
    assert set(report["tampered"]) <= {str(problem), str(pinned)}, report["tampered"]
    assert not report["passed"] and not any(k["passed"] for k in report["kernels"])
