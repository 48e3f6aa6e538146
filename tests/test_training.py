"""harness.workflows.training: the tutorial's integration check. Bug classes: a kernel path that silently
trains with another RMSNorm (call counts), a save/reload that loses weights, paths that diverge."""

import json

import torch

from harness.cli import main
from harness.incremental import key as keys
from harness.registry.registry import REGISTRY, load_project_kernels
from harness.settings import PROJECT_ROOT
from harness.workflows import training

TINY = training.Config(in_features=8, hidden=33, steps=5, batch=4, n_val=8, n_test=8)


def _project_rmsnorm():
    load_project_kernels()
    return REGISTRY.get("rmsnorm", "triton_rmsnorm").fn


def _conditions(report):
    return {c["name"]: c for c in report["conditions"]}


def test_tiny_run_passes_every_condition(device):
    report = training.run(TINY, device, _project_rmsnorm())
    conds = _conditions(report)
    assert report["passed"], [c for c in report["conditions"] if not c["passed"]]
    assert set(conds) == {"initial_output", "initial_gradient", "learned", "final_mse", "reload", "calls"}
    assert report["figures"]["kernel_calls"] == {"forward": 5, "backward": 5}
    assert report["figures"]["oracle_path_kernel_calls"] == {"forward": 0, "backward": 0}
    assert report["figures"]["reload_param_max_abs_diff"] == 0.0
    assert report["figures"]["reload_output_max_abs_diff"] == 0.0
    assert len(report["train_loss"]["kernel"]) == TINY.steps


def test_kernel_path_that_bypasses_the_kernel_fails_the_call_count(device, monkeypatch):
    # targets: training "works" but on the reference path, so the kernel was never exercised
    monkeypatch.setattr(training.KernelRMSNorm, "forward", training.TorchRMSNorm.forward)
    report = training.run(TINY, device, _project_rmsnorm())
    conds = _conditions(report)
    assert not report["passed"]
    assert not conds["calls"]["passed"] and "ran 0 forwards and 0 backwards" in conds["calls"]["detail"]
    assert conds["final_mse"]["passed"]  # the numbers alone would not have caught it


class _ScaledGradient(torch.autograd.Function):
    """Identity forward; the backward scales the upstream gradient by 1 + 1e-5."""

    @staticmethod
    def forward(ctx, y):
        return y.clone()

    @staticmethod
    def backward(ctx, g):
        return g * (1 + 1e-5)


def test_a_forward_off_by_1e_5_fails_initial_output(device):
    # targets: a precision bug of about 170 fp32 roundings in the norm's output, which a fixed
    # fp32 table (1e-5 + 1e-4 |y|) let through: the predictions move by a few 1e-6
    fn = _project_rmsnorm()
    report = training.run(TINY, device, lambda x, g, eps: fn(x, g, eps) * (1 + 1e-5))
    conds = _conditions(report)
    assert not conds["initial_output"]["passed"] and not conds["initial_gradient"]["passed"]
    assert "oracle path" in conds["initial_output"]["detail"] and conds["final_mse"]["passed"]


def test_a_backward_off_by_1e_5_fails_initial_gradient_only(device):
    # targets: a wrong backward whose forward is right (the predictions agree exactly)
    fn = _project_rmsnorm()
    report = training.run(TINY, device, lambda x, g, eps: _ScaledGradient.apply(fn(x, g, eps)))
    conds = _conditions(report)
    assert conds["initial_output"]["passed"] and not conds["initial_gradient"]["passed"]


def test_the_network_oracle_is_the_float64_network_and_its_allowance_covers_fp32_torch(device):
    # targets: an error model that fails fp32 torch on the network (the terms of a sum that
    # cancels left out), or an oracle that is not the network
    torch.manual_seed(0)
    model = training.build_model(TINY, training.TorchRMSNorm).to(device)
    data = training.synthetic_data(TINY, device)
    net = training._network()
    xb, yb = data.train[0][: TINY.batch], data.train[1][: TINY.batch]
    expected = net.oracle(model, xb, yb)
    w1, b1, gamma, w2, b2 = (p.detach().double() for p in model.parameters())
    h = xb.double() @ w1.T + b1
    pred = torch.nn.functional.silu(h * torch.rsqrt(h.square().mean(-1, keepdim=True) + training.EPS) * gamma) @ w2.T + b2
    assert torch.allclose(expected[net.prediction], pred, rtol=1e-12, atol=0)
    torch.nn.functional.mse_loss(model(xb), yb).backward()
    for name, p in model.named_parameters():
        judged = net.compare(net.gradient(name), p.grad, expected)
        assert judged.passed and judged.err_ratio < 0.5, (name, judged.message)
    assert net.compare(net.prediction, model(xb).detach(), expected).passed


def test_data_splits_are_disjoint_and_sized(device):
    data = training.synthetic_data(TINY, device)
    assert data.train[0].shape == (TINY.steps * TINY.batch, TINY.in_features)
    assert data.val[0].shape[0] == TINY.n_val and data.test[0].shape[0] == TINY.n_test
    assert not (data.test[0][:1] == data.train[0]).all(dim=1).any()


def test_cli_writes_the_report_and_exits_zero(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(training.CONFIGS, "interpreter", TINY)
    monkeypatch.setitem(training.CONFIGS, "cuda", TINY)
    assert main(["train-check", "--report-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "train_check.json").read_text())
    assert report["passed"] and report["config"]["steps"] == 5
    out = capsys.readouterr().out
    assert "PASS  calls" in out and "train-check passed" in out


def test_cli_exits_one_when_a_condition_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(training.CONFIGS, "interpreter", TINY)
    monkeypatch.setitem(training.CONFIGS, "cuda", TINY)
    monkeypatch.setattr(training, "FINAL_MSE_RTOL", -1.0)  # no difference can satisfy it
    assert main(["train-check", "--report-dir", str(tmp_path)]) == 1
    assert "FAIL  final_mse" in capsys.readouterr().out


def test_configs_keep_the_tutorial_shape():
    assert training.CONFIGS["cuda"].in_features == 128 and training.CONFIGS["cuda"].hidden == 257
    for cfg in training.CONFIGS.values():
        assert (cfg.steps, cfg.batch, cfg.hidden) == (100, 32, 257)


def test_cli_trains_a_plugin_kernel_by_name(tmp_path, monkeypatch, capsys):
    # targets: a train-check that silently trains the project's kernel instead of the one asked for
    monkeypatch.setitem(training.CONFIGS, "interpreter", TINY)
    monkeypatch.setitem(training.CONFIGS, "cuda", TINY)
    plugin = "examples/plugins/tutorial_rmsnorm.py"
    assert main(["train-check", "--plugin", plugin, "--kernel", "tutorial_rmsnorm", "--report-dir", str(tmp_path)]) == 0
    report = json.loads((tmp_path / "train_check.json").read_text())
    assert report["kernel"] == "tutorial_rmsnorm" and report["figures"]["kernel_calls"] == {"forward": 5, "backward": 5}


def test_cli_names_the_known_kernels_for_an_unknown_one(tmp_path, capsys):
    assert main(["train-check", "--kernel", "no_such_kernel", "--report-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err  # other tests of this process may have registered more rmsnorm kernels
    assert "no_such_kernel" in err and "registered:" in err and "triton_rmsnorm" in err


def test_cli_reuses_an_unchanged_verdict_and_reruns_a_changed_kernel(tmp_path, monkeypatch, capsys):
    # targets: a reused verdict that hides a change to the kernel (or a run that never reuses)
    monkeypatch.setitem(training.CONFIGS, "interpreter", TINY)
    monkeypatch.setitem(training.CONFIGS, "cuda", TINY)
    plugin = tmp_path / "my_rmsnorm.py"
    plugin.write_text(f"import sys\nsys.path.insert(0, {str(PROJECT_ROOT / 'examples/plugins')!r})\n"
                      "import _tutorial_impl\nfrom harness import register_kernel\n"
                      "register_kernel('rmsnorm', name='my_train_rmsnorm')(_tutorial_impl.make())\n")
    command = ["train-check", "--plugin", str(plugin), "--kernel", "my_train_rmsnorm", "--report-dir", str(tmp_path / "r")]
    assert main(command) == 0
    assert "my_train_rmsnorm: rerun: no saved verdict" in capsys.readouterr().out
    assert main(command) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "r" / "train_check.json").read_text())
    assert "my_train_rmsnorm: reused (verdict of " in out and "(reused: verdict of " in out
    assert report["reused"]["saved_at"] and report["seconds"] == 0.0 and report["reused"]["seconds"] > 0
    assert report["passed"] and report["figures"]["kernel_calls"] == {"forward": 5, "backward": 5}
    assert main([*command, "--no-cache"]) == 0
    assert "rerun: --no-cache" in capsys.readouterr().out
    plugin.write_text(plugin.read_text() + "\n# one more line\n")
    keys.closure.cache_clear()  # as the next command's fresh process would read the sources anew
    assert main(command) == 0
    assert f"rerun: {plugin} changed" in capsys.readouterr().out
