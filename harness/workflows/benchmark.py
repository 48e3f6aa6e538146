"""Timing and memory of an op's implementations, side by side, with the tutorial's protocol.

Protocol (``Protocol()``): CUDA events recorded around whole calls; 20 warm-up calls are run
and excluded (they also absorb Triton and torch.compile compilation); then 50 samples, each
the elapsed time of 20 consecutive calls divided by 20; the figure reported is the median of
the 50 samples (quartiles, min and max are kept too). Two modes per implementation:
``forward`` (inference: the whole timing loop runs under ``torch.no_grad()``) and
``forward+backward`` (forward, then ``torch.autograd.grad`` of the output with the workload's
upstream gradient, or of a scalar output). Extra peak memory is
``torch.cuda.max_memory_allocated()`` during one call minus the memory allocated before it
(inputs excluded; outputs, saved tensors, scratch and gradients included). Achieved bandwidth
is the workload's minimal bytes moved divided by the median, compared with the device copy
ceiling measured in the same run (a 1 GiB device-to-device copy, bytes read + written, same
protocol).

Interface of a benchmark definition ``bench/<op>.py`` (the engine knows nothing op-specific)::

    def workloads() -> list[Workload]
        # each Workload: a name, make(device) -> BenchInputs, the minimal bytes moved per mode
        # (for bandwidth), optionally FLOP per mode, whether --quick keeps it, and optionally
        # its own Protocol (e.g. fewer calls per sample for 100 ms calls)
    def implementations() -> dict[str, Callable | Unavailable]
        # name -> a callable with the op's kernel signature, called as fn(*inputs.args);
        # Unavailable(reason) for one that cannot run here (the report notes it and skips it)

``BenchInputs.args`` are the positional arguments; ``grad_wrt`` the positions that get
gradients in forward+backward mode; ``upstream`` the gradient of the output (None for a scalar
output such as a loss). Inputs are made afresh for every implementation, so one that writes
into its inputs (Liger's in-place backward) cannot change what the next one sees. Each
implementation's first forward output is compared with the first implementation's
(``max_abs_diff_vs_first``), so a wrongly wired implementation shows up in the table.

Length (over 400 lines): the protocol, the memory measurement and the rendering of one benchmark
run; what is op-specific lives in ``bench/<op>.py``.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import gc
import importlib
import statistics
import time
from typing import Any, Callable, Sequence

import torch

from harness.errors import UsageError
from harness.registry import discovery
from harness.settings import DEFAULTS

MODES = ("forward", "forward+backward")


@dataclasses.dataclass(frozen=True)
class Protocol:
    warmup: int = 20
    samples: int = 50
    calls_per_sample: int = 20

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.samples < 1 or self.calls_per_sample < 1:
            raise ValueError(f"Protocol needs warmup >= 0, samples >= 1, calls_per_sample >= 1, got {self}")


TUTORIAL_PROTOCOL = Protocol()
QUICK_PROTOCOL = Protocol(warmup=5, samples=10, calls_per_sample=5)


@dataclasses.dataclass
class BenchInputs:
    args: tuple[Any, ...]
    grad_wrt: tuple[int, ...] = ()
    upstream: torch.Tensor | None = None


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str  # e.g. "32768x4096 bf16"
    make: Callable[[str], BenchInputs]
    bytes: dict[str, int]  # mode -> minimal bytes read + written
    flops: dict[str, float] = dataclasses.field(default_factory=dict)  # mode -> FLOP, when it matters
    quick: bool = False  # kept by --quick
    protocol: Protocol | None = None  # None: the tutorial's protocol (or the quick one with --quick)
    # the goals the project's kernels are held to here: mode -> median us, and extra peak bytes
    targets_us: dict[str, float] = dataclasses.field(default_factory=dict)
    target_peak_bytes: dict[str, int] = dataclasses.field(default_factory=dict)
    # mode -> what limits the project's kernels here (bytes, launches, compilation), from the
    # measurements in docs/perf-notes.md: printed beside a goal the run does not meet
    limits: dict[str, str] = dataclasses.field(default_factory=dict)


PROJECT_MARK = "(project)"  # an implementation whose name holds this is one of the project's kernels


@dataclasses.dataclass(frozen=True)
class Unavailable:
    reason: str  # what is missing and how to get it

    @classmethod
    def liger(cls, exc: BaseException) -> "Unavailable":
        """Liger-Kernel could not be imported (not installed, or built for another triton)."""
        return cls(
            f"liger_kernel not importable ({type(exc).__name__}: {exc}); "
            "pip install --no-deps liger-kernel==0.8.5 (pure Python)"
        )


class CudaClock:
    """CUDA events around a block of calls; ``stop`` waits for the GPU and returns seconds."""

    def __init__(self) -> None:
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def sync(self) -> None:
        torch.cuda.synchronize()

    def start(self) -> None:
        self._start.record()

    def stop(self) -> float:
        self._end.record()
        self._end.synchronize()
        return self._start.elapsed_time(self._end) / 1e3


class WallClock:
    """perf_counter, for running the engine on the CPU in tests (not a benchmark)."""

    def sync(self) -> None:
        pass

    def start(self) -> None:
        self._t = time.perf_counter()

    def stop(self) -> float:
        return time.perf_counter() - self._t


def time_calls(fn: Callable[[], Any], protocol: Protocol, clock) -> list[float]:
    """Seconds per call, one value per sample (each sample = calls_per_sample calls)."""
    for _ in range(protocol.warmup):
        fn()
    clock.sync()
    samples = []
    for _ in range(protocol.samples):
        clock.start()
        for _ in range(protocol.calls_per_sample):
            fn()
        samples.append(clock.stop() / protocol.calls_per_sample)
    return samples


def summarize(samples: Sequence[float]) -> dict[str, float]:
    """Median (the reported figure), quartiles, min and max, in microseconds."""
    if not samples:
        raise ValueError("no samples to summarize")
    us = sorted(s * 1e6 for s in samples)
    if len(us) >= 2:
        q1, _, q3 = statistics.quantiles(us, n=4, method="inclusive")
    else:
        q1 = q3 = us[0]
    return {"median_us": statistics.median(us), "q1_us": q1, "q3_us": q3, "min_us": us[0], "max_us": us[-1], "samples": len(us)}


def _first_tensor(out: Any) -> torch.Tensor:
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    raise TypeError(f"an implementation must return a tensor (or a tuple starting with one), got {type(out).__name__}")


def make_call(fn: Callable, inputs: BenchInputs, mode: str) -> Callable[[], Any]:
    """A zero-argument closure doing one whole call of ``mode``."""
    if mode == "forward":
        args = inputs.args
        return lambda: fn(*args)  # run under grad_mode("forward"): no autograd graph is recorded
    if mode != "forward+backward":
        raise ValueError(f"unknown mode {mode!r}; choose from {MODES}")
    if not inputs.grad_wrt:
        raise ValueError("forward+backward needs BenchInputs.grad_wrt (the positions that get gradients)")
    args = list(inputs.args)
    for i in inputs.grad_wrt:
        args[i] = args[i].detach().requires_grad_(True)
    leaves = [args[i] for i in inputs.grad_wrt]
    upstream = inputs.upstream

    def forward_backward():
        out = _first_tensor(fn(*args))
        return torch.autograd.grad(out, leaves, grad_outputs=upstream)

    return forward_backward


def grad_mode(mode: str):
    """The autograd mode a mode's calls run in: forward is timed as inference (no graph)."""
    return torch.no_grad() if mode == "forward" else torch.enable_grad()


def extra_peak_bytes(call: Callable[[], Any], device: str) -> int | None:
    """Peak memory allocated during one call beyond what was allocated before it (CUDA only)."""
    if not str(device).startswith("cuda"):
        return None
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    result = call()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - before
    del result
    return int(peak)


def copy_ceiling(device: str, clock, protocol: Protocol, nbytes: int = DEFAULTS.bench_copy_bytes) -> dict:
    """Device-to-device copy bandwidth (bytes read + written per second), measured here."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    src.fill_(1)
    dst = torch.empty_like(src)
    stats = summarize(time_calls(lambda: dst.copy_(src), protocol, clock))
    del src, dst
    if str(device).startswith("cuda"):
        torch.cuda.empty_cache()
    return {"bytes": 2 * nbytes, **stats, "bytes_per_s": 2 * nbytes / (stats["median_us"] * 1e-6)}


def load_definition(op: str):
    """Import ``bench/<op>.py`` and check it has the two functions of the interface."""
    known = [name.rpartition(".")[2] for name in discovery.modules(discovery.BENCHES)]
    if op not in known:
        raise UsageError(f"no benchmark definition for op {op!r}: add bench/{op}.py; defined: {', '.join(known) or 'none'}")
    module = importlib.import_module(f"{discovery.BENCHES}.{op}")
    missing = [f for f in ("workloads", "implementations") if not callable(getattr(module, f, None))]
    if missing:
        raise UsageError(f"bench/{op}.py must define {' and '.join(missing)}() (see harness/workflows/benchmark.py's docstring)")
    return module


def _max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float | None:
    if a.shape != b.shape:
        return None
    return float((a.detach().float() - b.detach().float()).abs().max()) if a.numel() else 0.0


def run(
    definition,
    *,
    device: str,
    clock,
    quick: bool = False,
    select: str = "*",
    measure_ceiling: bool = True,
    on_result: Callable[[dict], None] | None = None,
) -> dict:
    """Every implementation on every workload, both modes. Never raises for one implementation:
    an implementation that fails records its error and the run goes on."""
    default = QUICK_PROTOCOL if quick else TUTORIAL_PROTOCOL
    workloads = [w for w in definition.workloads() if w.quick or not quick]
    impls = {n: f for n, f in definition.implementations().items() if fnmatch.fnmatchcase(n, select)}
    if not impls:
        raise UsageError(f"--select {select!r} matches no implementation; defined: {', '.join(definition.implementations())}")
    notes = [f"{name}: skipped, {f.reason}" for name, f in impls.items() if isinstance(f, Unavailable)]
    runnable = {n: f for n, f in impls.items() if not isinstance(f, Unavailable)}
    ceiling = copy_ceiling(device, clock, default) if measure_ceiling else None

    results = []
    for w in workloads:
        protocol = w.protocol or default
        reference_out = None
        for name, fn in runnable.items():
            for mode in MODES:
                row = {"workload": w.name, "implementation": name, "mode": mode,
                       "protocol": dataclasses.asdict(protocol), "bytes": w.bytes.get(mode), "flops": w.flops.get(mode)}
                try:
                    inputs = w.make(device)
                    if mode == "forward":
                        with torch.no_grad():
                            out = _first_tensor(fn(*inputs.args))
                        if reference_out is None:
                            reference_out = out
                        row["max_abs_diff_vs_first"] = _max_abs_diff(out, reference_out)
                        del out
                    call = make_call(fn, inputs, mode)
                    with grad_mode(mode):
                        stats = summarize(time_calls(call, protocol, clock))
                        row.update(stats)
                        row["extra_peak_bytes"] = extra_peak_bytes(call, device)
                    seconds = stats["median_us"] * 1e-6
                    if row["bytes"]:
                        row["bytes_per_s"] = row["bytes"] / seconds
                        if ceiling:
                            row["fraction_of_copy_ceiling"] = row["bytes_per_s"] / ceiling["bytes_per_s"]
                    if row["flops"]:
                        row["flops_per_s"] = row["flops"] / seconds
                    del call, inputs
                except Exception as exc:  # one broken implementation must not hide the others' figures
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                results.append(row)
                if on_result:
                    on_result(row)
        del reference_out
        if str(device).startswith("cuda"):
            torch.cuda.empty_cache()
    return {
        "protocol": dataclasses.asdict(default),
        "modes": list(MODES),
        "copy_ceiling": ceiling,
        "workloads": [{"name": w.name, "bytes": w.bytes, "flops": w.flops, "quick": w.quick,
                       "targets_us": w.targets_us, "target_peak_bytes": w.target_peak_bytes} for w in workloads],
        "implementations": list(impls),
        "notes": notes,
        "results": results,
        "targets": assess_targets(workloads, results),
    }


def assess_targets(workloads: Sequence[Workload], results: Sequence[dict]) -> list[dict]:
    """Per workload and mode with a goal: the project's fastest kernel against it (met, or the
    gap as a ratio), and that kernel's time as a ratio of every other implementation's in the
    same run (below 1: faster). Extra peak memory the same way, for the same kernel."""
    out = []
    for w in workloads:
        for mode in MODES:
            if mode not in w.targets_us and mode not in w.target_peak_bytes:
                continue
            rows = [r for r in results if r["workload"] == w.name and r["mode"] == mode and "error" not in r]
            ours = [r for r in rows if PROJECT_MARK in r["implementation"]]
            if not ours:
                continue
            best = min(ours, key=lambda r: r["median_us"])
            item = {"workload": w.name, "mode": mode, "kernel": best["implementation"], "median_us": best["median_us"],
                    "vs": {r["implementation"]: best["median_us"] / r["median_us"] for r in rows if r is not best}}
            if mode in w.targets_us:
                goal = w.targets_us[mode]
                item.update(target_us=goal, time_met=best["median_us"] <= goal, time_ratio=best["median_us"] / goal)
            if mode in w.target_peak_bytes and best.get("extra_peak_bytes") is not None:
                goal = w.target_peak_bytes[mode]
                item.update(target_peak_bytes=goal, extra_peak_bytes=best["extra_peak_bytes"],
                            memory_met=best["extra_peak_bytes"] <= goal)
            item["met"] = item.get("time_met", True) and item.get("memory_met", True)
            if mode in w.limits and not item["met"]:
                item["limited_by"] = w.limits[mode]
            item["text"] = format_target(item)  # what the human reports show, as bench printed it
            out.append(item)
    return out


def format_target(t: dict) -> str:
    """One goal's line: the project kernel's figure against the goal, met or the gap, and its
    time as a ratio of every other implementation's in the same run."""
    parts = []
    if "target_us" in t:
        verdict = "met" if t["time_met"] else f"NOT met, {t['time_ratio']:.2f}x the target"
        parts.append(f"{t['median_us']:.1f} us against <= {t['target_us']:.1f} us: {verdict}")
    if "target_peak_bytes" in t:
        verdict = "met" if t["memory_met"] else "NOT met"
        parts.append(f"extra peak {t['extra_peak_bytes'] / 1e9:.3f} GB against <= {t['target_peak_bytes'] / 1e9:.3f} GB: {verdict}")
    vs = ", ".join(f"{ratio:.2f}x {name}" for name, ratio in t["vs"].items())
    return f"target {t['workload']} {t['mode']}: {t['kernel']} " + "; ".join(parts) + (f" (time: {vs})" if vs else "")


def format_targets(targets: Sequence[dict]) -> list[str]:
    lines = []
    for t in targets:
        lines.append(format_target(t))
        if t.get("limited_by"):
            lines.append(f"  limited by: {t['limited_by']}")
    return lines


def format_table(report: dict) -> str:
    """One block per workload: median per mode, bandwidth as a share of the copy ceiling (or
    TFLOP/s where the workload counts FLOP), extra peak memory."""
    lines = []
    ceiling = report.get("copy_ceiling")
    if ceiling:
        lines.append(f"device copy ceiling: {ceiling['bytes_per_s'] / 1e12:.2f} TB/s (read + write, 1 GiB copy)")
    nan = float("nan")
    for w in report["workloads"]:
        compute = bool(w.get("flops"))
        lines.append(f"\n{w['name']}")
        head = f"  {'implementation':<34}"
        for mode in report["modes"]:
            rate = f"{'TFLOP/s':>8}" if compute else f"{'TB/s':>6} {'ceil%':>6}"
            head += f" {mode + ' us':>20} {rate} {'+peak MiB':>10}"
        lines.append(head)
        rows = [r for r in report["results"] if r["workload"] == w["name"]]
        for impl in dict.fromkeys(r["implementation"] for r in rows):
            line = f"  {impl:<34}"
            for mode in report["modes"]:
                r = next((x for x in rows if x["implementation"] == impl and x["mode"] == mode), None)
                if r is None or "error" in r:
                    line += f" {'error' if r else '-':>20} {'':>{8 if compute else 13}} {'':>10}"
                    continue
                if compute:
                    rate = f"{r['flops_per_s'] / 1e12 if r.get('flops_per_s') else nan:>8.1f}"
                else:
                    bw, frac = r.get("bytes_per_s"), r.get("fraction_of_copy_ceiling")
                    rate = f"{bw / 1e12 if bw else nan:>6.2f} {100 * frac if frac else nan:>6.1f}"
                peak = r.get("extra_peak_bytes")
                line += f" {r['median_us']:>20.1f} {rate} {peak / 2**20 if peak is not None else nan:>10.1f}"
            lines.append(line)
        for r in rows:
            if "error" in r:
                lines.append(f"  error: {r['implementation']} {r['mode']}: {r['error']}")
    targets = format_targets(report.get("targets", []))
    if targets:
        lines.append("")
        lines.extend(targets)
        if any(t.get("time_met") is False or t.get("memory_met") is False for t in report.get("targets", [])):
            lines.append("the measurements behind each 'limited by', and every attempt: docs/perf-notes.md")
    for note in report["notes"]:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def plot(report: dict, path) -> str | None:
    """Grouped bars of the medians per workload and mode; None (and no file) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    workloads = [w["name"] for w in report["workloads"]]
    fig, axes = plt.subplots(1, max(1, len(workloads)), figsize=(6 * max(1, len(workloads)), 4.5), squeeze=False)
    for ax, wname in zip(axes[0], workloads):
        rows = [r for r in report["results"] if r["workload"] == wname and "error" not in r]
        impls = list(dict.fromkeys(r["implementation"] for r in rows))
        width = 0.8 / max(1, len(report["modes"]))
        for k, mode in enumerate(report["modes"]):
            values = [next((r["median_us"] for r in rows if r["implementation"] == i and r["mode"] == mode), 0.0) for i in impls]
            ax.bar([j + k * width for j in range(len(impls))], values, width, label=mode)
        ax.set_xticks([j + width * (len(report["modes"]) - 1) / 2 for j in range(len(impls))])
        ax.set_xticklabels(impls, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("median time per call (us)")
        ax.set_title(wname)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
