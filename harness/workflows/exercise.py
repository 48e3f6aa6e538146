"""The tutorial's exercise: divide by BLOCK instead of N, and watch which cases notice.

The forward kernel pads each row to BLOCK = next_power_of_2(N) lanes and masks the padding,
so ``tl.sum(x * x) / N`` is the mean over the row's real columns. Writing ``/ BLOCK`` gives
the same number when N == BLOCK (N = 256) and a smaller mean otherwise: on a row of 257 ones
the mean becomes 257/512 and the output 1/sqrt(0.50195) = 1.411458 instead of 0.9999995.
The backward's ``mean(u * x)`` (in dx = r*u - x*r^3*mean(u*x)) can carry the same mistake.

The mutants are made from the source of the project's rmsnorm kernel (taken from the
registry): one ``/ N`` after a ``tl.sum`` is rewritten to ``/ BLOCK`` in one kernel function,
and the module is rebuilt in memory the way every generated mutant is
(harness.mutation.mutagen.build_module), so ``@triton.jit`` reads the mutated source. They run through ``harness.run.runner.run_case`` like any kernel, so what is shown is
the harness's own records.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import shlex
from typing import Callable

import torch

from harness.cases.case import Case
from harness.cases.command import console_words
from harness.mutation.mutagen import build_module
from harness.registry.registry import Origin, REGISTRY, KernelEntry
from vocabulary import EntryKind, Layout

OP = "rmsnorm"
PROJECT_KERNEL = "triton_rmsnorm"
# mutant name -> (kernel function whose mean is broken, what it shows)
MUTANTS = {
    "block_divisor_forward": ("_rmsnorm_forward", "forward: mean(x^2) divided by BLOCK instead of N"),
    "block_divisor_backward": ("_rmsnorm_backward", "backward: mean(u*x) in dx divided by BLOCK instead of N"),
}
SIZES = (256, 257)  # N == BLOCK hides the bug; N = 257 (BLOCK 512) shows it
ROWS = 17
EPS = 1e-6
TUTORIAL_ROW_CORRECT = 0.9999995  # the tutorial's figures for a row of 257 ones
TUTORIAL_ROW_MUTANT = 1.411458


class _DivideByBlock(ast.NodeTransformer):
    """In one function, ``tl.sum(...) / N`` -> ``tl.sum(...) / BLOCK``."""

    def __init__(self, function: str):
        self.function, self.inside, self.count = function, False, 0

    def visit_FunctionDef(self, node: ast.FunctionDef):
        if node.name != self.function:
            return node
        self.inside = True
        self.generic_visit(node)
        self.inside = False
        return node

    def visit_BinOp(self, node: ast.BinOp):
        self.generic_visit(node)
        if (
            self.inside
            and isinstance(node.op, ast.Div)
            and isinstance(node.right, ast.Name)
            and node.right.id == "N"
            and isinstance(node.left, ast.Call)
            and ast.unparse(node.left.func) == "tl.sum"
        ):
            self.count += 1
            return ast.copy_location(ast.BinOp(left=node.left, op=ast.Div(), right=ast.Name("BLOCK", ast.Load())), node)
        return node


def mutant_source(source: str, function: str, module: str = "the kernel module") -> str:
    """The module source with the BLOCK-divisor mistake in ``function``; exactly one site."""
    tree = ast.parse(source)
    transformer = _DivideByBlock(function)
    tree = ast.fix_missing_locations(transformer.visit(tree))
    if transformer.count != 1:
        raise RuntimeError(
            f"expected exactly one 'tl.sum(...) / N' in {function} of {module}, found {transformer.count}; "
            "the kernel changed: update harness/workflows/exercise.py's MUTANTS"
        )
    return ast.unparse(tree)


def build_mutant(name: str) -> KernelEntry:
    """Rebuild the project kernel's module with one mean divided by BLOCK; return its entry."""
    function, description = MUTANTS[name]
    project = REGISTRY.get(OP, PROJECT_KERNEL)
    module = project.fn.__module__
    code = mutant_source(inspect.getsource(importlib.import_module(module)), function, module)
    fn = build_module(module, code, PROJECT_KERNEL, name)
    return dataclasses.replace(
        project, fn=fn, name=name, kind=EntryKind.MUTANT, origin=Origin.GENERATED, description=description,
        meta={"operator": "divide_by_block", "function": function},
    )


def cases(spec) -> list[Case]:
    return [spec.case({"M": ROWS, "N": n}, torch.float32, Layout.CONTIGUOUS, "normal", {"eps": EPS}, None, seed=n)
            for n in SIZES]


def _scalar_check(fn: Callable, device: str) -> dict:
    """The tutorial's row of 257 ones (gamma and upstream gradient of ones too): y and dx at column 0."""
    x = torch.ones(1, 257, device=device, requires_grad=True)
    gamma = torch.ones(257, device=device, requires_grad=True)
    y = fn(x, gamma, EPS)
    (dx,) = torch.autograd.grad(y, [x], torch.ones_like(y))
    return {"y": float(y.detach()[0, 0]), "dx": float(dx[0, 0])}


def run(*, backend: str, device: str) -> dict:
    """Run the project kernel and both mutants on N=256 and N=257; return the report."""
    spec = REGISTRY.op(OP)
    entries = [REGISTRY.get("rmsnorm", PROJECT_KERNEL)] + [build_mutant(n) for n in MUTANTS]
    from vocabulary import Phase
    from harness.run.runner import run_case

    records, verdicts = [], []
    for entry in entries:
        for case in cases(spec):
            result = run_case(spec, entry, case, backend=backend, device=device, phase=Phase.EXPLICIT)
            for r in result.records:
                d = r.to_dict()
                if entry.kind is EntryKind.MUTANT:
                    d["repro"] = shlex.join([*console_words(), "exercise", "--backend", backend])
                records.append(d)
            verdicts.append({
                "kernel": entry.name,
                "N": int(case["N"]),
                "case_id": case.id,
                "passed": result.passed,
                "failed_checks": sorted({r.check for r in result.records if not r.passed}),
            })
    ones = {e.name: _scalar_check(e.fn, device) for e in entries}

    def verdict(kernel: str, n: int) -> dict:
        return next(v for v in verdicts if v["kernel"] == kernel and v["N"] == n)

    expectations = [
        (f"{PROJECT_KERNEL} passes at N=256 and N=257",
         verdict(PROJECT_KERNEL, 256)["passed"] and verdict(PROJECT_KERNEL, 257)["passed"]),
    ]
    for name, check in (("block_divisor_forward", "forward"), ("block_divisor_backward", "dx")):
        expectations.append((f"{name} passes at N=256 (N == BLOCK)", verdict(name, 256)["passed"]))
        expectations.append((f"{name} fails '{check}' at N=257", check in verdict(name, 257)["failed_checks"]))
    expectations.append(("block_divisor_backward's forward still passes at N=257",
                         "forward" not in verdict("block_divisor_backward", 257)["failed_checks"]))
    expectations.append((f"row of 257 ones: correct y = {TUTORIAL_ROW_CORRECT} (to 1e-6)",
                         abs(ones[PROJECT_KERNEL]["y"] - TUTORIAL_ROW_CORRECT) < 1e-6))
    expectations.append((f"row of 257 ones: mutant y = {TUTORIAL_ROW_MUTANT} (to 1e-5)",
                         abs(ones["block_divisor_forward"]["y"] - TUTORIAL_ROW_MUTANT) < 1e-5))
    return {
        "passed": all(ok for _, ok in expectations),
        "expectations": [{"what": what, "passed": bool(ok)} for what, ok in expectations],
        "kernels": [{"name": e.name, "kind": e.kind, "description": e.description} for e in entries],
        "verdicts": verdicts,
        "row_of_ones": {
            "shape": [1, 257], "eps": EPS, "values": ones,
            "expected": {"y_correct": 1.0 / (1.0 + EPS) ** 0.5, "y_mutant": 1.0 / (257 / 512 + EPS) ** 0.5,
                         "dx_correct": 1.0 / (1 + EPS) ** 0.5 - (1 + EPS) ** -1.5,
                         "dx_backward_mutant": 1.0 / (1 + EPS) ** 0.5 - (1 + EPS) ** -1.5 * 257 / 512},
        },
        "cases": records,
    }
