"""kernels.rmsnorm: the project's kernel passes the floor, rejects out-of-contract inputs
cleanly, and reproduces the tutorial's worked numbers."""

import pytest
import torch

from kernel_checks import assert_rejected
from harness.registry.registry import REGISTRY
from harness.run.runner import run_case
from kernels import rmsnorm as k

SPEC = REGISTRY.op("rmsnorm")
ENTRY = REGISTRY.get("rmsnorm", "triton_rmsnorm")
FLOOR = SPEC.floor_cases(backend="interpreter")


@pytest.mark.parametrize("case", FLOOR[::3], ids=lambda c: c.id)
def test_project_kernel_passes_floor_cases(case, device, backend):
    run = run_case(SPEC, ENTRY, case, backend=backend.name, device=device)
    assert run.passed, [(r.check, r.message) for r in run.records if not r.passed]


def test_row_of_257_ones_matches_the_tutorial(device):
    x = torch.ones(1, 257, device=device)
    y = k.rmsnorm(x, torch.ones(257, device=device), 1e-6)
    assert abs(y[0, 0].item() - 0.9999995) < 1e-7


def test_call_counters_count_autograd_passes(device):
    before = dict(k.CALLS)
    x = torch.randn(3, 5, device=device, requires_grad=True)
    k.rmsnorm(x, torch.randn(5, device=device), 1e-6).sum().backward()
    assert k.CALLS["forward"] == before["forward"] + 1 and k.CALLS["backward"] == before["backward"] + 1


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda d: (torch.ones(2, 3, 4, device=d), torch.ones(4, device=d), 1e-6), ValueError, "2-D"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(5, device=d), 1e-6), ValueError, "gamma must have shape (4,)"),
        (lambda d: (torch.ones(2, 4, device=d, dtype=torch.float64), torch.ones(4, device=d, dtype=torch.float64), 1e-6), TypeError, "float64"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(4, device=d, dtype=torch.float16), 1e-6), TypeError, "cast gamma"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(4, device=d), 0.0), ValueError, "eps must be"),
        (lambda d: (torch.ones(2, 4, device=d), torch.ones(4, device=d), float("nan")), ValueError, "eps must be"),
        (lambda d: (torch.ones(1, 65537, device=d), torch.ones(65537, device=d), 1e-6), ValueError, "N = 65537"),
        (lambda d: (torch.ones(1, 0, device=d), torch.ones(0, device=d), 1e-6), ValueError, "N = 0"),
    ],
)
def test_contract_errors_name_constraint_value_and_fix(make, error, words, device):
    assert_rejected(k.rmsnorm, make(device), error, words)


def test_empty_batch_returns_empty(device):
    x = torch.ones(0, 8, device=device, requires_grad=True)
    y = k.rmsnorm(x, torch.ones(8, device=device), 1e-6)
    assert y.shape == (0, 8)


def test_the_interpreter_backward_plan_gives_power_of_two_tiles_and_two_of_them_per_program():
    # bug classes: a tile height that is no power of two (Triton refuses the shape), and one tile per
    # program, which leaves the tile loaded ahead (the backward's second _rows_of call) never read
    import triton

    for m in range(1, 400):
        for n in (1, 7, 257, 336, 1024, 8192):
            programs, rows = k._backward_plan(m, triton.next_power_of_2(n), torch.device("cpu"))
            per_program = triton.cdiv(m, programs)
            assert rows >= 1 and rows & (rows - 1) == 0, (m, n, rows)
            assert per_program == 1 or triton.cdiv(per_program, rows) >= 2, (m, n, rows, per_program)
