"""Training integration: does an rmsnorm kernel take part in real learning?

A small regression network ``Linear -> RMSNorm -> SiLU -> Linear`` is built twice from the
same initial weights. The oracle path normalises with a plain fp32 torch RMSNorm written
from ``oracles/rmsnorm.py``'s formula (the tutorial's reference: float32 for float32 inputs);
the kernel path calls a registered rmsnorm kernel (the project's by default, any plugin's on
request). Both are trained with Adam
for the same steps on the same batches of a synthetic data set (train/validation/test splits
drawn from one seeded teacher network). What is checked, each a named condition:

- initial_output:   both paths give the same predictions before training: each within the
                    ops' error model of the float64 network (harness.workflows.network)
- initial_gradient: the same parameter gradients on the first batch, judged the same way
- learned:          the kernel path's test MSE went down
- final_mse:        both paths end with the same test MSE (relative difference <= 1e-3)
- reload:           the kernel path's weights, saved and loaded into a fresh network,
                    give exactly the same parameters and the same predictions (difference 0)
- calls:            the kernel path ran exactly one forward and one backward per step;
                    this is what proves the training did not silently use another RMSNorm.

The forward/backward counts come from a wrapper around the kernel (its calls) and a hook on
its output (the backward passes that went through that output), around the training steps only
(evaluation forwards are not counted); nothing is asked of the kernel itself.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from harness.workflows.network import Network
from vocabulary import Backend

EPS = 1e-6
# Relative difference allowed between the two paths' final test MSE: 100 Adam steps amplify
# fp32 rounding differences of ~1e-7 in the normalised activations, not to 1e-3.
FINAL_MSE_RTOL = 1e-3


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes of the network and the data. ``hidden`` is the RMSNorm's N (the tutorial's 257)."""

    in_features: int = 128
    hidden: int = 257
    out_features: int = 1
    steps: int = 100
    batch: int = 32
    lr: float = 1e-3
    n_val: int = 256
    n_test: int = 512
    seed: int = 0

    @property
    def n_train(self) -> int:
        return self.steps * self.batch  # one pass over the training split


# The tutorial's dimensions on a GPU; the interpreter runs one row per program, one after the
# other, so CI uses a narrower input and fewer evaluation rows (same hidden N=257, same steps).
CONFIGS = {
    Backend.CUDA: Config(),
    Backend.INTERPRETER: Config(in_features=32, n_val=64, n_test=128),
}


class TorchRMSNorm(torch.nn.Module):
    """The oracle's formula in plain torch, in float32 for float32 activations (the tutorial's reference)."""

    def __init__(self, n: int, eps: float = EPS):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + self.eps)
        return (xf * r * self.weight.float()).to(x.dtype)


class CountedKernel:
    """A kernel ``f(x, gamma, eps)`` whose forward calls, and backward passes through its
    output, are counted: the proof that training used this kernel and no other RMSNorm."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.calls = {"forward": 0, "backward": 0}

    def __call__(self, x: torch.Tensor, gamma: torch.Tensor, eps: float) -> torch.Tensor:
        y = self.fn(x, gamma, eps)
        self.calls["forward"] += 1
        if isinstance(y, torch.Tensor) and y.requires_grad:
            y.register_hook(self._backward_seen)
        return y

    def _backward_seen(self, grad: torch.Tensor) -> None:
        self.calls["backward"] += 1


class KernelRMSNorm(torch.nn.Module):
    """The same module around a kernel under test."""

    def __init__(self, n: int, kernel: CountedKernel, eps: float = EPS):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))
        self.kernel = kernel
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.kernel(x, self.weight, self.eps)


def build_model(cfg: Config, norm: Callable[[int], torch.nn.Module]) -> torch.nn.Sequential:
    return torch.nn.Sequential(
        torch.nn.Linear(cfg.in_features, cfg.hidden),
        norm(cfg.hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(cfg.hidden, cfg.out_features),
    )


@dataclasses.dataclass
class Splits:
    train: tuple[torch.Tensor, torch.Tensor]
    val: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]


def synthetic_data(cfg: Config, device: str) -> Splits:
    """Targets from a fixed random teacher (tanh of a linear map, then a linear readout) plus
    noise; drawn on the CPU from the config's seed, so both backends see the same numbers."""
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    total = cfg.n_train + cfg.n_val + cfg.n_test
    x = torch.randn(total, cfg.in_features, generator=gen)
    w1 = torch.randn(cfg.in_features, 64, generator=gen) / cfg.in_features**0.5
    w2 = torch.randn(64, cfg.out_features, generator=gen) / 8.0
    y = torch.tanh(x @ w1) @ w2 + 0.1 * torch.randn(total, cfg.out_features, generator=gen)
    x, y = x.to(device), y.to(device)
    a, b = cfg.n_train, cfg.n_train + cfg.n_val
    return Splits(train=(x[:a], y[:a]), val=(x[a:b], y[a:b]), test=(x[b:], y[b:]))


@dataclasses.dataclass
class Condition:
    name: str
    passed: bool
    detail: str


def _max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).abs().max())


def _network() -> Network:
    """The network as a declared op, built on the registered rmsnorm op's declaration."""
    from harness.registry.registry import REGISTRY, load_builtin_ops

    load_builtin_ops()
    return Network(REGISTRY.op("rmsnorm").decl, EPS)


def _worst(ratios: dict[str, float]) -> str:
    """The largest |error| / allowed of each path, as the detail of a condition says it."""
    return ", ".join(f"{path} path {ratio:.3g}" for path, ratio in ratios.items())


@torch.no_grad()
def _mse(model: torch.nn.Module, data: tuple[torch.Tensor, torch.Tensor]) -> float:
    x, y = data
    return float(torch.nn.functional.mse_loss(model(x), y))


@dataclasses.dataclass
class _Models:
    oracle: torch.nn.Module
    kernel: torch.nn.Module
    counted: CountedKernel
    conditions: list[Condition]


def run(cfg: Config, device: str, kernel_fn: Callable, *, workdir: str | None = None) -> dict:
    """Train both paths with ``kernel_fn`` (``f(x, gamma, eps)``) on the kernel path; return the
    report (``passed`` and one entry per condition)."""
    started = time.perf_counter()
    data = synthetic_data(cfg, device)
    torch.manual_seed(cfg.seed)
    counted = CountedKernel(kernel_fn)
    oracle = build_model(cfg, TorchRMSNorm).to(device)
    kernel = build_model(cfg, lambda n: KernelRMSNorm(n, counted)).to(device)
    kernel.load_state_dict(oracle.state_dict())
    models = _Models(oracle, kernel, counted, [])
    initial = _check_initial(models, cfg, data)
    mse_before = {"oracle": _mse(oracle, data.test), "kernel": _mse(kernel, data.test)}
    history, counts, leaked = _train(models, cfg, data)
    val = {"oracle": _mse(oracle, data.val), "kernel": _mse(kernel, data.val)}
    test = {"oracle": _mse(oracle, data.test), "kernel": _mse(kernel, data.test)}
    rel = _check_learning(models, cfg, mse_before, test)
    reload_diffs = _check_reload(models, cfg, data, device, workdir)
    _check_calls(models, cfg, counts, leaked)
    conditions = models.conditions
    return {
        "passed": all(c.passed for c in conditions),
        "config": {**dataclasses.asdict(cfg), "n_train": cfg.n_train, "eps": EPS, "dtype": "float32",
                   "model": f"Linear({cfg.in_features},{cfg.hidden}) -> RMSNorm({cfg.hidden}) -> SiLU -> "
                            f"Linear({cfg.hidden},{cfg.out_features})", "optimizer": f"Adam(lr={cfg.lr})"},
        "conditions": [dataclasses.asdict(c) for c in conditions],
        "figures": {
            **initial,
            "test_mse_before": mse_before,
            "test_mse": test,
            "val_mse": val,
            "final_mse_rel_diff": rel,
            **reload_diffs,
            "kernel_calls": counts,
            "oracle_path_kernel_calls": leaked,
        },
        "train_loss": history,
        "seconds": round(time.perf_counter() - started, 3),
    }


def _check_initial(models: _Models, cfg: Config, data: Splits) -> dict:
    """Same predictions and same first-batch gradients before any step: each path's within the
    ops' error model of the float64 network (harness.workflows.network) at the shared weights."""
    net = _network()
    oracle, kernel = models.oracle, models.kernel
    same_init = all(torch.equal(a, b) for a, b in zip(oracle.state_dict().values(), kernel.state_dict().values()))
    xt, yt = data.test
    with torch.no_grad():
        out_o, out_k = oracle(xt), kernel(xt)
    expected = net.oracle(kernel, xt, yt)
    judged = {path: net.compare(net.prediction, out, expected) for path, out in (("oracle", out_o), ("kernel", out_k))}
    init_out = _max_abs(out_k, out_o)
    models.conditions.append(Condition(
        "initial_output", same_init and all(c.passed for c in judged.values()),
        f"max |kernel - oracle| = {init_out:.3g} on {xt.shape[0]} test rows; |error| / allowed against the float64 "
        f"network (the ops' error model): {_worst({p: c.err_ratio for p, c in judged.items()})}; "
        f"identical initial weights: {same_init}",
    ))
    xb, yb = data.train[0][: cfg.batch], data.train[1][: cfg.batch]
    expected = net.oracle(kernel, xb, yb)
    grads = []
    for model in (oracle, kernel):
        model.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(xb), yb).backward()
        grads.append({n: p.grad.detach().clone() for n, p in model.named_parameters()})
        model.zero_grad(set_to_none=True)
    judged = {path: {n: net.compare(net.gradient(n), g[n], expected) for n in g} for path, g in zip(("oracle", "kernel"), grads)}
    init_grad = max(_max_abs(grads[1][n], grads[0][n]) for n in grads[0])
    worst = max(judged["kernel"], key=lambda n: judged["kernel"][n].err_ratio)
    models.conditions.append(Condition(
        "initial_gradient", all(c.passed for path in judged.values() for c in path.values()),
        f"max |kernel - oracle| over all parameter gradients = {init_grad:.3g}; |error| / allowed against the "
        f"float64 network: {_worst({p: max(c.err_ratio for c in cs.values()) for p, cs in judged.items()})} "
        f"(worst on the kernel path: {worst})",
    ))
    return {"initial_output_max_abs_diff": init_out, "initial_gradient_max_abs_diff": init_grad}


def _train(models: _Models, cfg: Config, data: Splits) -> tuple[dict, dict, dict]:
    """Adam on both paths, batch by batch; (loss history, kernel calls of the kernel path,
    kernel calls made while the oracle path trained)."""
    history = {"oracle": [], "kernel": []}
    counted = {"forward": 0, "backward": 0}
    leaked = {"forward": 0, "backward": 0}
    opts = {
        "oracle": torch.optim.Adam(models.oracle.parameters(), lr=cfg.lr),
        "kernel": torch.optim.Adam(models.kernel.parameters(), lr=cfg.lr),
    }
    for step in range(cfg.steps):
        sl = slice(step * cfg.batch, (step + 1) * cfg.batch)
        xb, yb = data.train[0][sl], data.train[1][sl]
        for name, model in (("oracle", models.oracle), ("kernel", models.kernel)):
            before = dict(models.counted.calls)
            opts[name].zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opts[name].step()
            for k in counted:
                (counted if name == "kernel" else leaked)[k] += models.counted.calls[k] - before[k]
            history[name].append(float(loss.detach()))
    return history, counted, leaked


def _check_learning(models: _Models, cfg: Config, mse_before: dict, test: dict) -> float:
    models.conditions.append(Condition(
        "learned", test["kernel"] < mse_before["kernel"],
        f"kernel path test MSE {mse_before['kernel']:.5f} -> {test['kernel']:.5f} after {cfg.steps} steps",
    ))
    rel = abs(test["kernel"] - test["oracle"]) / max(abs(test["oracle"]), 1e-30)
    models.conditions.append(Condition(
        "final_mse", rel <= FINAL_MSE_RTOL,
        f"test MSE oracle {test['oracle']:.6f}, kernel {test['kernel']:.6f}, relative difference {rel:.2e} "
        f"(allowed {FINAL_MSE_RTOL:g})",
    ))
    return rel


def _check_reload(models: _Models, cfg: Config, data: Splits, device: str, workdir: str | None) -> dict:
    """The kernel path's weights, saved and loaded into a fresh network: exactly the same."""
    kernel, xt = models.kernel, data.test[0]
    with tempfile.TemporaryDirectory(prefix="train_check_", dir=workdir) as tmp:
        path = Path(tmp) / "kernel_path.pt"
        torch.save(kernel.state_dict(), path)
        reloaded = build_model(cfg, lambda n: KernelRMSNorm(n, CountedKernel(models.counted.fn))).to(device)
        reloaded.load_state_dict(torch.load(path, map_location=device, weights_only=True))
    param_diff = max(_max_abs(a, b) for a, b in zip(kernel.state_dict().values(), reloaded.state_dict().values()))
    with torch.no_grad():
        out_diff = _max_abs(reloaded(xt), kernel(xt))
    models.conditions.append(Condition(
        "reload", param_diff == 0.0 and out_diff == 0.0,
        f"saved and reloaded kernel-path weights: max parameter difference {param_diff:g}, "
        f"max prediction difference {out_diff:g} (must both be 0)",
    ))
    return {"reload_param_max_abs_diff": param_diff, "reload_output_max_abs_diff": out_diff}


def _check_calls(models: _Models, cfg: Config, counted: dict, leaked: dict) -> None:
    models.conditions.append(Condition(
        "calls", counted == {"forward": cfg.steps, "backward": cfg.steps} and not any(leaked.values()),
        f"kernel path ran {counted['forward']} forwards and {counted['backward']} backwards "
        f"in {cfg.steps} steps (must be {cfg.steps} and {cfg.steps}); the oracle path made "
        f"{leaked['forward'] + leaked['backward']} kernel calls (must be 0)",
    ))
