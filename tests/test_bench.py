"""harness.workflows.benchmark and bench/rmsnorm.py, on the CPU. Bug classes: wrong statistics (mean for
median, warm-up counted), a failing implementation hiding the others, byte counts that make
bandwidth figures wrong, implementations wired with the wrong signature."""

import types

import pytest
import torch

from harness.workflows import benchmark
from harness.cli import main
from harness.errors import UsageError


class FakeClock:
    """Each call of ``tick`` advances time; samples are then exact."""

    def __init__(self):
        self.now, self.syncs = 0.0, 0

    def sync(self):
        self.syncs += 1

    def start(self):
        self.t0 = self.now

    def stop(self):
        return self.now - self.t0


def test_summarize_reports_the_median_not_the_mean():
    s = benchmark.summarize([1e-6, 2e-6, 3e-6, 4e-6, 100e-6])
    assert s["median_us"] == pytest.approx(3.0)
    assert (s["min_us"], s["max_us"]) == pytest.approx((1.0, 100.0))
    assert s["q1_us"] == pytest.approx(2.0) and s["q3_us"] == pytest.approx(4.0)
    assert benchmark.summarize([5e-6])["median_us"] == pytest.approx(5.0)
    with pytest.raises(ValueError):
        benchmark.summarize([])


def test_time_calls_follows_the_protocol_and_excludes_warmup():
    clock = FakeClock()
    calls = []

    def fn():
        calls.append(1)
        clock.now += 1.0 if len(calls) <= 20 else 0.001  # slow warm-up (compilation) must not count

    samples = benchmark.time_calls(fn, benchmark.TUTORIAL_PROTOCOL, clock)
    assert len(calls) == 20 + 50 * 20 and len(samples) == 50
    assert all(s == pytest.approx(0.001) for s in samples)
    assert clock.syncs >= 1


def test_tutorial_protocol_numbers():
    p = benchmark.TUTORIAL_PROTOCOL
    assert (p.warmup, p.samples, p.calls_per_sample) == (20, 50, 20)
    with pytest.raises(ValueError):
        benchmark.Protocol(samples=0)


def _definition(impls):
    def make(device):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0)).to(device)
        return benchmark.BenchInputs(args=(x, 2.0), grad_wrt=(0,), upstream=torch.ones(4, 8, device=device))

    w = benchmark.Workload("4x8", make, bytes={"forward": 256, "forward+backward": 512}, quick=True,
                           protocol=benchmark.Protocol(warmup=1, samples=3, calls_per_sample=2))
    big = benchmark.Workload("big", make, bytes={}, quick=False)
    return types.SimpleNamespace(workloads=lambda: [w, big], implementations=lambda: impls)


def _broken(x, s):
    raise RuntimeError("boom")


def test_engine_runs_every_implementation_and_records_failures():
    impls = {
        "mul": lambda x, s: x * s,
        "mul_again": lambda x, s: s * x + 0.5,
        "broken": _broken,
        "absent": benchmark.Unavailable("not installed here"),
    }
    report = benchmark.run(_definition(impls), device="cpu", clock=benchmark.WallClock(), quick=True, measure_ceiling=False)
    assert [w["name"] for w in report["workloads"]] == ["4x8"]  # --quick keeps the small workload only
    rows = {(r["implementation"], r["mode"]): r for r in report["results"]}
    assert set(rows) == {(i, m) for i in ("mul", "mul_again", "broken") for m in benchmark.MODES}
    assert rows[("broken", "forward")]["error"] == "RuntimeError: boom"
    assert rows[("mul", "forward")]["median_us"] > 0 and rows[("mul", "forward")]["samples"] == 3
    assert rows[("mul", "forward")]["bytes_per_s"] == pytest.approx(256 / (rows[("mul", "forward")]["median_us"] * 1e-6))
    assert rows[("mul_again", "forward")]["max_abs_diff_vs_first"] == pytest.approx(0.5)
    assert rows[("mul", "forward+backward")]["extra_peak_bytes"] is None  # CPU: no CUDA memory stats
    assert report["notes"] == ["absent: skipped, not installed here"]
    table = benchmark.format_table(report)
    assert "mul_again" in table and "error: broken forward: RuntimeError: boom" in table and "absent" in table


def test_engine_select_and_full_mode():
    d = _definition({"a": lambda x, s: x * s, "b": lambda x, s: x + s})
    report = benchmark.run(d, device="cpu", clock=benchmark.WallClock(), select="a", measure_ceiling=False,
                           quick=False)
    assert {r["implementation"] for r in report["results"]} == {"a"}
    assert [w["name"] for w in report["workloads"]] == ["4x8", "big"]
    with pytest.raises(UsageError, match="matches no implementation"):
        benchmark.run(d, device="cpu", clock=benchmark.WallClock(), select="zzz", measure_ceiling=False)


def test_forward_backward_call_returns_gradients():
    d = _definition({})
    inputs = d.workloads()[0].make("cpu")
    (gx,) = benchmark.make_call(lambda x, s: x * s, inputs, "forward+backward")()
    assert torch.equal(gx, torch.full((4, 8), 2.0))


def test_copy_ceiling_counts_read_and_write():
    c = benchmark.copy_ceiling("cpu", benchmark.WallClock(), benchmark.Protocol(1, 2, 1), nbytes=1 << 16)
    assert c["bytes"] == 2 << 16 and c["bytes_per_s"] > 0


def test_rmsnorm_workloads_match_the_tutorial_and_count_bytes():
    import bench.rmsnorm as br

    ws = {w.name: w for w in br.workloads()}
    assert set(ws) == {"128x257 fp32", "32768x4096 bf16"}
    assert ws["128x257 fp32"].quick and not ws["32768x4096 bf16"].quick
    big = ws["32768x4096 bf16"].bytes
    assert big["forward"] == (2 * 32768 * 4096 + 4096) * 2  # 537 MB: 126 us at 4.25 TB/s
    assert big["forward+backward"] == (5 * 32768 * 4096 + 3 * 4096) * 2
    inputs = ws["128x257 fp32"].make("cpu")
    x, gamma, eps = inputs.args
    assert x.shape == (128, 257) and gamma.shape == (257,) and x.dtype == torch.float32
    assert inputs.upstream.shape == (128, 257) and inputs.grad_wrt == (0, 1) and eps == 1e-6


def test_rmsnorm_implementations_agree_on_a_small_input(device):
    import bench.rmsnorm as br

    impls = br.implementations()
    assert list(impls)[0] == "triton_rmsnorm (project)"
    assert {"torch reference (eager)", "torch F.rms_norm", "torch.compile(reference)", "liger RMSNorm"} <= set(impls)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 257, generator=gen).to(device)
    gamma = (torch.randn(257, generator=gen) * 0.5 + 1).to(device)
    expected = br.torch_reference(x, gamma, 1e-6)
    for name, fn in impls.items():
        if isinstance(fn, benchmark.Unavailable) or name.startswith("torch.compile") or (name.startswith("liger") and device == "cpu"):
            continue
        torch.testing.assert_close(fn(x, gamma, 1e-6), expected, atol=1e-5, rtol=1e-4, msg=name)


def test_unknown_op_names_the_defined_ones():
    with pytest.raises(UsageError, match="rmsnorm"):
        benchmark.load_definition("no_such_op")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_cli_without_gpu_says_so_and_exits_2(capsys):
    assert main(["bench", "--op", "rmsnorm"]) == 2
    assert "bench needs a CUDA GPU" in capsys.readouterr().err


def test_plot_writes_a_png_or_declines(tmp_path):
    d = _definition({"a": lambda x, s: x * s})
    report = benchmark.run(d, device="cpu", clock=benchmark.WallClock(), quick=True, measure_ceiling=False)
    path = benchmark.plot(report, tmp_path / "b.png")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert path is None and not (tmp_path / "b.png").exists()
    else:
        assert (tmp_path / "b.png").stat().st_size > 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cli_quick_run_on_gpu(tmp_path, capsys):
    import json

    assert main(["bench", "--op", "rmsnorm", "--quick", "--select", "t*", "--report-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "bench_rmsnorm.json").read_text())
    assert report["copy_ceiling"]["bytes_per_s"] > 1e11
    rows = report["results"]
    assert {r["implementation"] for r in rows} >= {"triton_rmsnorm (project)", "torch F.rms_norm"}
    assert all("error" not in r and r["median_us"] > 0 for r in rows)
    assert all(r["extra_peak_bytes"] > 0 for r in rows if r["mode"] == "forward+backward")
    assert all(r["max_abs_diff_vs_first"] < 1e-4 for r in rows if r["mode"] == "forward")
    assert "128x257 fp32" in capsys.readouterr().out


def test_targets_judge_the_fastest_project_kernel_against_its_goal_and_the_others():
    def row(impl, mode, us, peak=None):
        return {"workload": "w", "implementation": impl, "mode": mode, "median_us": us, "extra_peak_bytes": peak}

    w = benchmark.Workload("w", make=None, bytes={}, targets_us={"forward": 100.0, "forward+backward": 300.0},
                           target_peak_bytes={"forward+backward": 1000},
                           limits={"forward": "launches", "forward+backward": "bytes: dW rewritten per chunk"})
    results = [row("a (project)", "forward", 90.0), row("b (project)", "forward", 120.0), row("torch", "forward", 60.0),
               row("a (project)", "forward+backward", 450.0, peak=1200), row("b (project)", "forward+backward", 400.0, peak=900),
               row("torch", "forward+backward", 500.0, peak=5000),
               {"workload": "w", "implementation": "liger", "mode": "forward", "error": "boom"}]
    fwd, both = benchmark.assess_targets([w], results)
    assert (fwd["kernel"], fwd["time_met"]) == ("a (project)", True)  # the faster of the two project kernels
    assert fwd["vs"] == {"b (project)": 90.0 / 120.0, "torch": 1.5}  # a failed implementation is left out
    assert (both["kernel"], both["time_met"], both["time_ratio"]) == ("b (project)", False, 400.0 / 300.0)
    assert both["memory_met"] is True and both["extra_peak_bytes"] == 900
    lines = benchmark.format_targets([fwd, both])
    assert "met (time: 0.75x b (project), 1.50x torch)" in lines[0]
    assert "NOT met, 1.33x the target" in lines[1] and "0.000 GB against <= 0.000 GB: met" in lines[1]
    # what limits a kernel is said where a goal is missed, and only there
    assert "limited_by" not in fwd and both["limited_by"] == "bytes: dW rewritten per chunk"
    assert lines[2] == "  limited by: bytes: dW rewritten per chunk" and len(lines) == 3
    # the report keeps each goal's verdict and line, for the human reports (which read records only)
    assert (fwd["met"], both["met"]) == (True, False) and (fwd["text"], both["text"]) == (lines[0], lines[1])
    # no project kernel, or no goal: nothing to judge
    assert benchmark.assess_targets([w], [row("torch", "forward", 1.0)]) == []
    assert benchmark.assess_targets([benchmark.Workload("w", make=None, bytes={})], results) == []


# The row-wise ops: (module, project kernel's name, LLM workload, its bytes, inputs of a small
# call, the torch implementation's name). Bug classes: a byte count that makes the bandwidth
# column wrong, an LLM shape that is not the one named, an implementation wired with another
# signature or another formula than the op.
_LN = (5, 257)


def _small_args(op, device):
    gen = torch.Generator().manual_seed(2)
    if op == "layer_norm":
        x, w, b = torch.randn(*_LN, generator=gen), torch.randn(257, generator=gen), torch.randn(257, generator=gen)
        return (x.to(device), w.to(device), b.to(device), 1e-5)
    if op == "softmax":
        return (torch.randn(*_LN, generator=gen).mul(4).to(device),)
    if op == "swiglu":
        return (torch.randn(*_LN, generator=gen).to(device), torch.randn(*_LN, generator=gen).to(device))
    if op == "add_rmsnorm":
        x, r, w = torch.randn(*_LN, generator=gen), torch.randn(*_LN, generator=gen), torch.randn(257, generator=gen)
        return (x.to(device), r.to(device), w.to(device), 1e-6)
    logits = torch.randn(6, 300, generator=gen).mul(2)
    target = torch.tensor([3, -100, 299, 0, 17, -100])
    return (logits.to(device), target.to(device), -100)


_NEW_BENCHES = {
    "layer_norm": ("32768x4096 bf16", (2 * 32768 * 4096 + 2 * 4096) * 2, (5 * 32768 * 4096 + 5 * 4096) * 2,
                   "torch F.layer_norm"),
    "softmax": ("32768x4096 bf16", 2 * 32768 * 4096 * 2, 5 * 32768 * 4096 * 2, "torch.softmax"),
    "swiglu": ("32768x4096 bf16", 3 * 32768 * 4096 * 2, 8 * 32768 * 4096 * 2, "torch F.silu(a) * b"),
    "add_rmsnorm": ("32768x4096 bf16", (4 * 32768 * 4096 + 4096) * 2, (7 * 32768 * 4096 + 3 * 4096) * 2,
                    "torch add + F.rms_norm"),
    "cross_entropy": ("N=16384 V=128256 bf16", 16384 * 128256 * 2 + 8 * 16384,
                      3 * 16384 * 128256 * 2 + 16 * 16384, "torch F.cross_entropy"),
}


@pytest.mark.parametrize("op", sorted(_NEW_BENCHES))
def test_row_op_workloads_have_the_llm_shape_and_count_bytes(op):
    import importlib

    mod = importlib.import_module(f"bench.{op}")
    name, fwd, fwd_bwd, _ = _NEW_BENCHES[op]
    ws = {w.name: w for w in mod.workloads()}
    assert name in ws and not ws[name].quick
    assert ws[name].bytes == {"forward": fwd, "forward+backward": fwd_bwd}
    quick = [w for w in ws.values() if w.quick]
    assert len(quick) == 1
    inputs = quick[0].make("cpu")
    assert inputs.grad_wrt and all(inputs.args[i].is_floating_point() for i in inputs.grad_wrt)
    if inputs.upstream is not None:  # a tensor output: dy has the output's shape
        assert inputs.upstream.shape == inputs.args[0].shape


@pytest.mark.parametrize("op", sorted(_NEW_BENCHES))
def test_row_op_implementations_agree_on_a_small_input(op, device):
    import importlib

    mod = importlib.import_module(f"bench.{op}")
    impls = mod.implementations()
    names = list(impls)
    assert names[0] == f"triton_{op} (project)"
    torch_name = _NEW_BENCHES[op][3]
    assert torch_name in impls and any(n.startswith("torch.compile") for n in names)
    assert any(n.startswith("liger") for n in names)
    args = _small_args(op, device)
    expected = impls[torch_name](*args)
    checked = 0
    for name, fn in impls.items():
        if isinstance(fn, benchmark.Unavailable) or name.startswith("torch.compile") or (name.startswith("liger") and device == "cpu"):
            continue
        torch.testing.assert_close(fn(*args), expected, atol=1e-5, rtol=1e-4, msg=name)
        checked += 1
    assert checked >= 2  # the project kernel was compared with torch, not only torch with itself
