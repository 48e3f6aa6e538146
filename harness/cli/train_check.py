"""``python -m harness train-check``: the tutorial's training integration (see harness/workflows/training.py)."""

from __future__ import annotations

import argparse

from harness.cli import common
from vocabulary import Backend, EntryKind

NAME = "train-check"
HELP = "train Linear -> RMSNorm -> SiLU -> Linear with the oracle and with the kernel, compare, reload"
EXAMPLE = "python -m harness train-check --backend interpreter"


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_backend_and_report_dir(p, writes="train_check.json")
    p.add_argument("--seed", type=common.positive_int, default=0, metavar="N", help="data and weight seed (default: 0)")
    p.add_argument("--kernel", metavar="NAME", default=None,
                   help="the rmsnorm kernel to train with: any registered one, plugins included "
                        "(default: the project's first rmsnorm kernel)")
    p.add_argument("--plugin", action="append", default=[], metavar="PATH", help="Python file that registers kernels (repeatable)")
    p.add_argument("--tutorial-dims", "--seed-dims", dest="tutorial_dims", action="store_true",
                   help="use the tutorial's dimensions (in_features 128) on the interpreter too (slower)")
    p.add_argument("--no-cache", action="store_true",
                   help="train anew, reusing no saved verdict (otherwise the verdict is reused while nothing that "
                        "can change it has changed: the kernel's module closure, the training workflow, the harness, "
                        "torch/triton, backend, device and the options; REPORT_DIR/incremental)")


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from harness.run import backend as backends

    backend = backends.select(args.backend)
    from harness.registry import loader
    from harness.workflows import training
    from reports import environment, writer

    from harness.incremental import plan as incremental
    from harness.incremental.store import Store

    loader.load_all(plugins=args.plugin)
    entry = kernel_entry(args.kernel)
    cfg = training.CONFIGS[Backend.CUDA if args.tutorial_dims else backend.name]
    cfg = dataclasses.replace(cfg, seed=args.seed)
    store = Store(args.report_dir, reuse=not args.no_cache)
    settings = {"config": dataclasses.asdict(cfg), "plugins": sorted(args.plugin)}
    plan = incremental.train_plan(entry, store, backend=backend.name, settings=settings)
    if plan.reused:  # this gate spent no training time; the saved run's own time stays in its marker
        saved = plan.saved["payload"]
        result = {**saved, "seconds": 0.0, "reused": {**plan.marker(), "seconds": saved.get("seconds")},
                  "notes": [*saved.get("notes", []), f"reused: the verdict of {plan.saved['saved_at']}, nothing it "
                            f"depends on has changed since (--no-cache trains anew)"]}
    else:
        result = training.run(cfg, backend.device, entry.fn)
    print(f"train-check: {entry.name}: {plan.describe()}")
    report = {**environment.header(backend.describe(), seed=args.seed), "kernel": entry.name, **result}
    if not plan.reused:  # a run that ended here is complete (an interrupted or crashed one never gets this far)
        incremental.remember(store, incremental.TRAIN, entry.name, plan, result)
    path = writer.write_json(args.report_dir, "train_check.json", report)
    print_summary(report, path=str(path))
    return 0 if report["passed"] else 1


def kernel_entry(name: str | None):
    """The registered rmsnorm kernel called ``name``, or the project's first one."""
    from harness.registry.registry import Origin
    from harness.errors import UsageError
    from harness.registry.registry import REGISTRY

    kernels = REGISTRY.select(op=training_op(), kind=EntryKind.KERNEL)
    if name is None:
        project = [e for e in kernels if e.origin is Origin.PROJECT]
        if not project:
            raise UsageError("train-check: no project rmsnorm kernel is registered; pass --kernel NAME (and --plugin FILE)")
        return project[0]
    found = [e for e in kernels if e.name == name]
    if not found:
        known = ", ".join(e.name for e in kernels) or "none"
        raise UsageError(f"train-check --kernel {name!r}: no rmsnorm kernel of that name; registered: {known}")
    return found[0]


def training_op() -> str:
    return "rmsnorm"  # the network of harness/workflows/training.py normalises with RMSNorm


def print_summary(report: dict, *, path: str) -> None:
    c, f = report["config"], report["figures"]
    print(f"train-check: kernel {report.get('kernel', '?')}, {report['backend']} on {report['device']}")
    print(f"  {c['model']}, {c['optimizer']}, {c['steps']} steps x {c['batch']} examples, "
          f"splits train/val/test = {c['n_train']}/{c['n_val']}/{c['n_test']}, seed {c['seed']}")
    print(f"  test MSE before: oracle {f['test_mse_before']['oracle']:.6f}  kernel {f['test_mse_before']['kernel']:.6f}")
    print(f"  test MSE after:  oracle {f['test_mse']['oracle']:.6f}  kernel {f['test_mse']['kernel']:.6f}"
          f"   (validation: oracle {f['val_mse']['oracle']:.6f}  kernel {f['val_mse']['kernel']:.6f})")
    width = max(len(x["name"]) for x in report["conditions"])
    for cond in report["conditions"]:
        mark = "PASS" if cond["passed"] else "FAIL"
        print(f"  {mark}  {cond['name']:<{width}}  {cond['detail']}")
    verdict = "train-check passed" if report["passed"] else "train-check FAILED"
    when = f" (reused: verdict of {report['reused']['saved_at']})" if report.get("reused") else ""
    print(f"{verdict} in {report['seconds']:.1f} s{when}; report: {path}")
