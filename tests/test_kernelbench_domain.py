"""KernelBench problems at sizes that fit the machine, within the reference's domain.

Bug classes: a problem whose real sizes (gigabytes of inputs) cannot even be allocated on the
machine that verifies it; a scaled-down problem that loses its structure (tied dims untied, a
spatial dim below the kernel size); a generated shape the reference itself rejects (a
convolution narrower than its kernel, targets beyond the class dim) reported as the candidate's
crash; fp16 / bf16 cases of an fp32 problem failing a correct candidate on the reference's own
low-precision error. Each fix is shown on a correct candidate (the identity: ModelNew is Model)
and a wrong one, which still fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from harness.kernelbench import _import
from harness.reference import domain, sizing
from harness.registry.registry import Contract, KernelEntry
from harness.run.runner import run_case

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests/fixtures/kernelbench"


def verify(problem: str, candidate: str, report: Path, *more: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, KB_PROBLEM=str(FIXTURES / f"{problem}.py"))
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "harness", "verify", "--reference", str(FIXTURES / f"{problem}.py"),
                           "--candidate", str(FIXTURES / f"{candidate}.py"), "--backend", "interpreter",
                           "--report-dir", str(report), "--max-examples", "2", *more],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def _problem(name: str):
    mod = _import(str(FIXTURES / f"{name}.py"), "--reference")
    if hasattr(mod, "_harness_original_sizes"):  # sized by an earlier test in this process: back to the file's
        for k, v in mod._harness_original_sizes.items():
            setattr(mod, k, v)
        del mod._harness_original_sizes
    return mod


def _accepts(mod):
    def accepts() -> bool:
        try:
            with torch.no_grad():
                mod.Model(*mod.get_init_inputs())(*mod.get_inputs())
        except Exception:  # noqa: BLE001
            return False
        return True
    return accepts


# --- sizes ------------------------------------------------------------------------------------

def test_sizes_are_measured_without_allocating_and_scaled_with_the_structure_kept():
    mod = _problem("conv_problem")
    shapes, out = sizing.measure(mod, mod.Model)  # 128 MiB of input, 254 MiB of output: meta tensors only
    assert shapes == [((16, 8, 512, 512), 16 * 8 * 512 * 512 * 4)] and out == (16, 16, 504, 504)
    scaling = sizing.fit(mod, mod.Model, backend="interpreter", accepts=_accepts(mod))
    assert scaling.scaled and scaling.largest_after <= sizing.ELEMENTS < scaling.largest_before
    assert mod.height == mod.width  # tied by equality in the example: still equal
    assert mod.height >= 9 and mod.kernel_size == 5 and mod.dilation == 2  # the dilated kernel (9) still fits
    assert mod.in_channels < 8 and mod.out_channels < 16  # the constructor's sizes follow the inputs'
    assert "height 512->" in scaling.text() and scaling.record()["sizes"]["height"][0] == 512
    shapes_after, _ = sizing.measure(mod, mod.Model)
    assert shapes_after[0][0] == (mod.batch_size, mod.in_channels, mod.height, mod.width)


def test_on_a_gpu_a_problem_past_the_gpu_case_budget_is_scaled_even_where_memory_would_hold_it(monkeypatch):
    """A GPU with memory to spare still gets the per-tensor budget of a GPU case: the declaration
    runs the float64 reference on the host at the example's sizes, and at a KernelBench problem's
    real sizes that alone took minutes."""
    mod = _problem("conv_problem")
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *a: (1 << 40, 1 << 40))  # 1 TiB free
    scaling = sizing.fit(mod, mod.Model, backend="cuda", accepts=_accepts(mod))
    assert scaling.scaled and scaling.largest_after <= sizing.GPU_ELEMENTS < scaling.largest_before
    assert scaling.largest_after > sizing.ELEMENTS  # the GPU's budget, not the interpreter's
    assert f"at most {sizing.GPU_ELEMENTS} elements a tensor" in scaling.text() and mod.height == mod.width
    small = _problem("conv_problem")
    small.batch_size, small.height, small.width = 1, 64, 64  # within the budget: real sizes
    assert not sizing.fit(small, small.Model, backend="cuda", accepts=_accepts(small)).scaled


def test_a_scaled_dim_stays_a_multiple_of_the_groups_dividing_it():
    class Grouped(torch.nn.Module):
        def __init__(self, c, groups):
            super().__init__()
            self.conv = torch.nn.Conv1d(c, c, 3, groups=groups)

        def forward(self, x):
            return self.conv(x)

    mod = type(sys)("grouped_problem")
    mod.batch_size, mod.channels, mod.length, mod.groups = 64, 96, 4096, 12
    mod.get_inputs = lambda: [torch.randn(mod.batch_size, mod.channels, mod.length)]
    mod.get_init_inputs = lambda: [mod.channels, mod.groups]
    mod.Model = Grouped
    scaling = sizing.fit(mod, Grouped, backend="interpreter", accepts=_accepts(mod))
    assert scaling.scaled and mod.channels % 12 == 0 and mod.groups == 12 and mod.length < 4096
    assert mod.channels >= 2 * 12  # groups of at least two channels, as the example's (8) were


def test_a_group_norm_scaled_keeps_groups_of_several_features():
    """KernelBench level 2's 37_Matmul_Swish_Sum_GroupNorm: 4096 features in 64 groups scaled to
    64 features made groups of one, whose normalisation is x - x = 0 exactly in float64 while an
    fp32 kernel's scale-and-shift form leaves its rounding (a false alarm 1e7 x the allowance)."""
    class GroupNormed(torch.nn.Module):
        def __init__(self, features, groups):
            super().__init__()
            self.norm = torch.nn.GroupNorm(groups, features)

        def forward(self, x):
            return self.norm(x)

    mod = type(sys)("groupnorm_problem")
    mod.batch_size, mod.features, mod.groups = 32768, 4096, 64
    mod.get_inputs = lambda: [torch.randn(mod.batch_size, mod.features)]
    mod.get_init_inputs = lambda: [mod.features, mod.groups]
    mod.Model = GroupNormed
    scaling = sizing.fit(mod, GroupNormed, backend="interpreter", accepts=_accepts(mod))
    assert scaling.scaled and mod.groups == 64 and mod.features % 64 == 0 and mod.features // 64 >= 2
    assert scaling.largest_after <= sizing.ELEMENTS


def test_a_batch_the_groups_divide_is_not_held_to_a_multiple_of_them():
    """KernelBench level 2's 88_Gemm_GroupNorm_Swish_Multiply_Swish: a batch of 1024 and 8192
    features in 256 groups. Were the batch (which no constructor sees) held to a multiple of 256 as
    the features are, 256 x 512 would be over the budget and the groups would fall to one feature."""
    class GroupNormed(torch.nn.Module):
        def __init__(self, in_features, features, groups):
            super().__init__()
            self.gemm = torch.nn.Linear(in_features, features)
            self.norm = torch.nn.GroupNorm(groups, features)

        def forward(self, x):
            return self.norm(self.gemm(x))

    mod = type(sys)("batched_groupnorm_problem")
    mod.batch_size, mod.in_features, mod.features, mod.groups = 1024, 8192, 8192, 256
    mod.get_inputs = lambda: [torch.randn(mod.batch_size, mod.in_features)]
    mod.get_init_inputs = lambda: [mod.in_features, mod.features, mod.groups]
    mod.Model = GroupNormed
    scaling = sizing.fit(mod, GroupNormed, backend="interpreter", accepts=_accepts(mod))
    assert scaling.scaled and mod.groups == 256 and mod.features % 256 == 0 and mod.features // 256 >= 2
    assert mod.batch_size < 256 and scaling.largest_after <= sizing.ELEMENTS


def test_a_problem_too_large_with_no_module_level_size_is_refused_in_one_line(tmp_path):
    problem = tmp_path / "literal_problem.py"
    problem.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
                       "def get_inputs():\n    return [torch.randn(4096, 4096)]\ndef get_init_inputs():\n    return []\n")
    candidate = tmp_path / "cand.py"
    candidate.write_text(f"import importlib.util as u\ns = u.spec_from_file_location('p', {str(problem)!r})\n"
                         "m = u.module_from_spec(s)\ns.loader.exec_module(m)\nModelNew = m.Model\n")
    proc = subprocess.run([sys.executable, "-m", "harness", "verify", "--reference", str(problem), "--candidate",
                           str(candidate), "--backend", "interpreter", "--report-dir", str(tmp_path / "r")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr
    assert "define the sizes get_inputs() uses as module-level ints" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


# --- the domain -------------------------------------------------------------------------------

def _conv_op():
    import harness

    w = torch.randn(4, 3, 5, 5).to(torch.float64)  # fp32 values: the kernel holds the very weights
    op = harness.from_reference(lambda x: F.conv2d(x, w, dilation=2), (torch.randn(2, 3, 20, 24),), vary="auto",
                                name="ref_dilated_conv", register=False, dtypes=(torch.float32,))
    return op, w


def test_lower_bounds_are_probed_and_generated_cases_keep_to_them():
    op, _ = _conv_op()
    assert op.lower == {"x_2": 9, "x_3": 9}  # (5 - 1) * 2 + 1: the dilated kernel's width
    cases = op.floor_cases(backend="interpreter")
    assert cases and min(c["x_2"] for c in cases) == 9 and min(c["x_3"] for c in cases) == 9
    assert {c["dtype"] for c in cases} == {"float32"}  # dtypes=: only the op's own


def test_a_case_the_reference_rejects_is_outside_the_domain_not_the_kernels_failure():
    op, w = _conv_op()
    calls = []

    def right(x):
        calls.append(x.shape)
        return F.conv2d(x.float(), w.float(), dilation=2).to(x.dtype)

    def no_dilation(x):  # wrong: the kernel read undilated
        return F.conv2d(x.float(), w.float())[..., :x.shape[-2] - 8, :x.shape[-1] - 8].to(x.dtype)

    below = op.case({"x_0": 2, "x_1": 3, "x_2": 4, "x_3": 12}, torch.float32, "contiguous", "normal", {}, None)
    inside = op.case({"x_0": 2, "x_1": 3, "x_2": 11, "x_3": 12}, torch.float32, "contiguous", "normal", {}, None)
    entry = KernelEntry(op.name, "right", right, Contract(), "kernel", "plugin", __file__)
    (record,) = run_case(op, entry, below, backend="interpreter", device="cpu").records
    assert record.passed and record.check == "contract" and domain.OUTSIDE in record.message
    assert "Kernel size can't be greater than actual input size" in record.message and not calls
    assert all(r.passed for r in run_case(op, entry, inside, backend="interpreter", device="cpu").records)
    wrong = KernelEntry(op.name, "no_dilation", no_dilation, Contract(), "kernel", "plugin", __file__)
    assert not all(r.passed for r in run_case(op, wrong, inside, backend="interpreter", device="cpu").records)


def test_index_inputs_stay_within_their_bounding_dim_when_it_shrinks():
    import harness

    logits, targets = torch.randn(16, 40), torch.arange(16) % 40 + 24  # targets up to 39
    op = harness.from_reference(lambda x, t: F.cross_entropy(x, t, reduction="none"), (logits, targets), vary="auto",
                                name="ref_ce_none", register=False)
    assert "x_1" in op.varying and op.lower.get("x_1", 1) == 1  # the class dim may shrink: the targets follow it
    assert op.decl.inputs[1].high == "x_1"


# --- end to end -------------------------------------------------------------------------------

def test_a_large_conv_problem_runs_scaled_and_its_identity_candidate_passes(tmp_path):
    proc = verify("conv_problem", "identity", tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    assert "conv_problem.py: scaled down to fit (CPU interpreter" in proc.stdout
    report = json.loads((tmp_path / "verify.json").read_text())
    assert report["kernelbench"]["sizes"]["scaled"] and report["kernelbench"]["sizes"]["sizes"]["height"][0] == 512
    forward = [r for r in report["cases"] if r["check"] == "forward"]
    assert forward and all(r["dtype"] == "float32" for r in forward)  # the problem's own dtype
    spatial = [int(r["case_id"].split("x_2=")[1].split(",")[0]) for r in forward]
    assert min(spatial) >= 9


def test_a_wrong_conv_candidate_still_fails_at_the_scaled_sizes(tmp_path):
    proc = verify("conv_problem", "conv_wrong", tmp_path, "-x")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr


@pytest.mark.parametrize("candidate, rc", [("identity", 0), ("crossentropy_wrong", 1)])
def test_cross_entropy_with_targets(candidate, rc, tmp_path):
    proc = verify("crossentropy_problem", candidate, tmp_path, *(["-x"] if rc else []))
    assert proc.returncode == rc, proc.stdout[-3000:] + proc.stderr
    if rc == 0:
        report = json.loads((tmp_path / "verify.json").read_text())
        assert not [r for r in report["cases"] if domain.OUTSIDE in (r.get("message") or "")]


# --- the benchmark script -----------------------------------------------------------------------

def test_the_benchmark_passes_an_identity_candidate_and_fails_a_perturbed_one(tmp_path):
    folder = tmp_path / "problems"
    folder.mkdir()
    (folder / "1_rowmean.py").write_text((FIXTURES / "rowmean_problem.py").read_text())
    rows = {}
    for kind, script in (("identity", "kernelbench_level1.py"), ("perturbed", "kernelbench_levels.py")):  # either name
        out = tmp_path / f"{kind}.md"
        proc = subprocess.run([sys.executable, f"scripts/{script}", "--dir", str(folder), "--candidate", kind,
                               "--max-examples", "1", "--out", str(out), "--json", str(tmp_path / f"{kind}.json")],
                              cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
        (rows[kind],) = json.loads((tmp_path / f"{kind}.json").read_text())
        assert "| 1_rowmean.py |" in out.read_text()
    assert rows["identity"]["outcome"] == "PASS" and rows["perturbed"]["outcome"] == "FAIL", rows
    assert rows["identity"]["cases"] > 1 and rows["identity"]["outside"] == 0
    # the why of a failure read from verify.json's records: each failed check with its cases, the worst ratio
    assert re.fullmatch(r"(\w+ \(\d+\), )+worst [\d.e+]+ x the allowed", rows["perturbed"]["why"]), rows["perturbed"]


# --- inputs and outputs as models have them -----------------------------------------------------

@pytest.mark.parametrize("problem, candidate, rc", [
    ("argmax_problem", "identity", 0), ("argmax_problem", "argmax_wrong", 1),
    ("masked_cumsum_problem", "identity", 0), ("masked_cumsum_problem", "masked_cumsum_wrong", 1),
])
def test_int_outputs_and_bool_inputs(problem, candidate, rc, tmp_path):
    """argmax's int64 output compared with the oracle's indices (one index off fails); a bool mask
    given to the model as bool, drawn as a random mask (a candidate ignoring it fails)."""
    proc = verify(problem, candidate, tmp_path, *(["-x"] if rc else []))
    assert proc.returncode == rc, proc.stdout[-3000:] + proc.stderr


# --- the terms an output element sums -----------------------------------------------------------

def test_the_terms_summed_are_read_from_the_reference_not_the_largest_dim():
    from harness.reference.summed import summed_length

    w = torch.randn(4, 3, 5, 5, dtype=torch.float64)
    assert summed_length(lambda a, b: a @ b, [torch.randn(8, 40), torch.randn(40, 24)]) == 40  # K, not 2K
    assert summed_length(lambda x: torch.linalg.norm(x), [torch.zeros(4, 5, 6)]) == 120  # every element, zeros too
    assert summed_length(lambda x: torch.cumsum(x, 1), [torch.randn(4, 50)]) == 50  # a row's last element
    assert summed_length(lambda x: F.conv2d(x, w), [torch.randn(2, 3, 20, 24)]) == 75  # channels x window
    assert summed_length(torch.relu, [torch.randn(4, 50)]) == 1  # elementwise


# --- the real sizes on a GPU that holds them --------------------------------------------------

def _relu_problem(batch: int, dim: int):
    import types

    mod = types.ModuleType("relu_problem")
    mod.batch_size, mod.dim = batch, dim
    mod.Model = type("Model", (torch.nn.Module,), {"forward": lambda self, x: torch.relu(x)})
    mod.get_inputs = lambda: [torch.randn(mod.batch_size, mod.dim)]
    mod.get_init_inputs = lambda: []
    return mod


def test_the_real_sizes_footprint_is_read_on_the_meta_device():
    mod = _relu_problem(4096, 393216)  # KernelBench's ReLU: 6 GiB of input, never allocated here
    n = 4096 * 393216
    assert sizing.footprint(mod, mod.Model) == n * (4 + 8) * 2  # input + float64 copy, output + float64


def test_on_a_gpu_the_real_sizes_run_as_one_case_where_free_memory_holds_them_with_the_margin():
    need = 4096 * 2048 * 12 * 2  # 192 MiB: past the GPU case budget (2^22 elements a tensor), so scaled
    for free, runs in ((int(need * sizing.REAL_MARGIN), True), (int(need * sizing.REAL_MARGIN) - 1, False),
                       (1 << 40, True)):
        mod = _relu_problem(4096, 2048)
        scaling = sizing.fit(mod, mod.Model, backend="cuda", free_memory=free)
        assert scaling.scaled and scaling.largest_after <= sizing.GPU_ELEMENTS  # every other case: scaled
        assert scaling.real is runs and scaling.record()["real_case"] is runs
        assert ("plus one case at the real sizes" if runs else "real sizes not run") in scaling.text()
    assert sizing.real_case(None, 1 << 40) == (False, "real sizes not run: their memory could not be read on the "
                                                      "meta device")
    mod = _relu_problem(4096, 2048)  # the CPU interpreter: as before, no real-size case and no word of one
    scaling = sizing.fit(mod, mod.Model, backend="interpreter")
    assert scaling.scaled and not scaling.real and "real sizes" not in scaling.text()
    small = _relu_problem(64, 64)  # within the budget: the real sizes are every case's
    assert not sizing.fit(small, small.Model, backend="cuda", free_memory=1 << 30).real


def test_the_real_case_is_one_gpu_floor_case_at_the_example_dims_and_none_where_the_weights_were_scaled(monkeypatch):
    from harness.kernelbench import _OnDevice
    from harness.ops.reference import from_reference

    monkeypatch.setattr(sizing, "GPU_ELEMENTS", 1 << 12)  # a small scaled example: the declaration probes it on the host
    mod = _relu_problem(4096, 2048)
    sizing.fit(mod, mod.Model, backend="cuda", free_memory=1 << 40)
    op = from_reference(_OnDevice(mod.Model().double()), mod.get_inputs(), vary="auto", name="kb_relu_real_t",
                        differentiable=False, register=False)
    op.real, why = sizing.real_dims(mod, op.decl.inputs, op.example, op.fixed)
    assert why == "" and sorted(op.real.values()) == [2048, 4096] and (mod.batch_size, mod.dim) != (4096, 2048)
    real = [c for c in op.floor_cases(backend="cuda") if {c[d] for d in op.dims} == {4096, 2048}]
    assert len(real) == 1 and real[0]["layout"] == "contiguous"
    assert not any({c[d] for d in op.dims} == {4096, 2048} for c in op.floor_cases(backend="interpreter"))
    conv = _problem("conv_problem")  # channels scaled: the weights cannot take the real inputs
    sizing.fit(conv, conv.Model, backend="cuda", free_memory=1 << 40, accepts=_accepts(conv))
    torch.manual_seed(0)
    model = conv.Model(*conv.get_init_inputs()).double()
    op = from_reference(_OnDevice(model), conv.get_inputs(), vary="auto", name="kb_conv_real_t",
                        differentiable=False, register=False)
    dims, why = sizing.real_dims(conv, op.decl.inputs, op.example, op.fixed)
    assert dims is None and "real sizes not run: the weights' dims" in why and "->" in why
