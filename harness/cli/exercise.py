"""``python -m harness exercise``: the tutorial's BLOCK-divisor exercise, through the harness's records."""

from __future__ import annotations

import argparse

from harness.cli import common

NAME = "exercise"
HELP = "show the BLOCK-instead-of-N mutant passing at N=256 and failing at N=257 (forward and backward)"
EXAMPLE = "python -m harness exercise --backend interpreter"


def add_arguments(p: argparse.ArgumentParser) -> None:
    common.add_backend_and_report_dir(p, writes="exercise.json")


def run(args: argparse.Namespace) -> int:
    from harness.run import backend as backends

    backend = backends.select(args.backend)
    from harness.workflows import exercise
    from reports import environment, writer

    from harness.registry.registry import load_project_kernels

    load_project_kernels()
    result = exercise.run(backend=backend.name, device=backend.device)
    report = {**environment.header(backend.describe(), seed=None), **result}
    path = writer.write_json(args.report_dir, "exercise.json", report)
    print_summary(report, path=str(path))
    return 0 if report["passed"] else 1


def _worst(records: list[dict], kernel: str, case_id: str, check: str) -> str:
    for r in records:
        if r["kernel"] == kernel and r["case_id"] == case_id and r["check"] == check:
            if r.get("err_ratio") is None:
                return "PASS" if r["passed"] else "FAIL"
            return f"{'PASS' if r['passed'] else 'FAIL'} {r['err_ratio']:.3g}x"
    return "-"


def print_summary(report: dict, *, path: str) -> None:
    print(f"exercise: divide by BLOCK instead of N  ({report['backend']} on {report['device']})")
    print("  verdicts of the harness's checks (err/allowed = worst error as a multiple of the tolerance):")
    checks = ("forward", "dx", "dgamma")
    print(f"    {'kernel':<24} {'N':>4}  " + "  ".join(f"{c:<14}" for c in checks) + "  case")
    for v in report["verdicts"]:
        cells = "  ".join(f"{_worst(report['cases'], v['kernel'], v['case_id'], c):<14}" for c in checks)
        print(f"    {v['kernel']:<24} {v['N']:>4}  {cells}  {v['case_id']}")
    ones = report["row_of_ones"]
    exp = ones["expected"]
    print(f"  a row of 257 ones (gamma = dy = 1, eps = {ones['eps']:g}); BLOCK = 512:")
    for name, vals in ones["values"].items():
        print(f"    {name:<24} y = {vals['y']:.7f}   dx = {vals['dx']:.7f}")
    print(f"    by hand: y = 1/sqrt(1 + eps) = {exp['y_correct']:.7f};  y with mean 257/512 = {exp['y_mutant']:.7f};"
          f"  dx = r - r^3 = {exp['dx_correct']:.2g};  dx with mean 257/512 = {exp['dx_backward_mutant']:.7f}")
    for e in report["expectations"]:
        print(f"  {'PASS' if e['passed'] else 'FAIL'}  {e['what']}")
    print(f"{'exercise shown as expected' if report['passed'] else 'exercise did NOT behave as expected'}; report: {path}")
