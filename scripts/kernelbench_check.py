"""KernelBench's own correctness check on a problem / candidate pair, written as KernelBench does it
(src/eval.py, run_and_check_correctness): Model and ModelNew built from ``get_init_inputs()`` under
the same seed; ``trials`` sets of ``get_inputs()`` (5 by default, each under its own seed drawn from
``seed``), forward only, under torch.no_grad, in fp32 on the example's shape; a trial passes when
the output has Model's shape and ``torch.allclose(out, ref, atol=1e-2, rtol=1e-2)``. The problem is
executed from its source into a namespace of its own (not in ``sys.modules``), as KernelBench loads
it; the candidate is imported from its file (KernelBench writes a Triton candidate to a file too).

    .venv/bin/python scripts/kernelbench_check.py PROBLEM.py CANDIDATE.py [--trials N] [--device cpu]

Prints ``correct`` (exit 0) or ``incorrect: why`` (exit 1). A candidate that ends the process
itself is what the caller sees (an early exit's status 0 with nothing printed: no verdict).
Used by docs/guarantees.md's table and tests/test_kernelbench*.py.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

ATOL = RTOL = 1e-2


def check(problem: str, candidate: str, trials: int = 5, seed: int = 42, device: str = "cpu") -> tuple[bool, str]:
    """(correct, why not) by KernelBench's check."""
    import torch

    context: dict = {}
    exec(compile(Path(problem).read_text(), "<string>", "exec"), context)  # as KernelBench loads the reference
    spec = importlib.util.spec_from_file_location(f"kernelbench_candidate_{Path(candidate).stem}", candidate)
    cand = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cand)
    torch.manual_seed(seed)
    init = context["get_init_inputs"]()
    model = context["Model"](*init).to(device)
    torch.manual_seed(seed)
    new = cand.ModelNew(*init).to(device)
    gen = torch.Generator().manual_seed(seed)
    trial_seeds = [int(torch.randint(0, 2**32 - 1, (1,), generator=gen)) for _ in range(trials)]
    with torch.no_grad():
        for i, s in enumerate(trial_seeds):
            torch.manual_seed(s)
            inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in context["get_inputs"]()]
            expected = model(*inputs)
            got = new(*inputs)
            if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                return False, f"trial {i}: output shape {getattr(got, 'shape', type(got).__name__)}, expected {expected.shape}"
            if not torch.allclose(got, expected, atol=ATOL, rtol=RTOL):
                return False, f"trial {i}: not allclose (max abs diff {(got - expected).abs().max().item():.3g})"
    return True, ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("problem")
    p.add_argument("candidate")
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", default="cpu")
    args = p.parse_args(argv)
    if args.device == "cpu":  # a Triton candidate runs on the interpreter there (set before triton is imported)
        os.environ.setdefault("TRITON_INTERPRET", "1")
    try:
        ok, why = check(args.problem, args.candidate, args.trials, args.seed, args.device)
    except Exception as exc:  # noqa: BLE001 - KernelBench counts a raising candidate as incorrect
        ok, why = False, f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    print("correct" if ok else f"incorrect: {why}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
