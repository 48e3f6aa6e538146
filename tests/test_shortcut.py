"""harness.shortcut: a KernelBench candidate that hands the whole computation to the reference is
named; honest candidates (Triton, or torch written otherwise) are not.

Bug classes: a shortcut that passes with no word about it; a false flag on honest code (a Triton
kernel, softmax written as exp / sum, a copy or dtype conversion around other ops)."""

from __future__ import annotations

import sys

import pytest
import torch

from harness import shortcut
from harness.kernelbench import _import

FIXTURES = "tests/fixtures/kernelbench"


def found(problem: str, candidate: str) -> str | None:
    prob = _import(f"{FIXTURES}/{problem}.py", "--reference")
    sys.modules[prob.__name__] = sys.modules.pop(prob.__name__)  # the problem last loaded, as in a kernel process
    cand = _import(f"{FIXTURES}/{candidate}.py", "--candidate")
    torch.manual_seed(0)
    init = prob.get_init_inputs()
    model, new = prob.Model(*init), cand.ModelNew(*init)
    new.load_state_dict(model.state_dict())
    return shortcut.detect(model, new, prob.get_inputs(), torch.device("cpu"))


@pytest.mark.parametrize("problem, candidate, expected", [
    ("softmax_problem", "hacks/calls_reference", shortcut.MODEL),  # the class in sys.modules
    ("softmax_problem", "hacks/calls_reference_reimport", shortcut.MODEL),  # the file imported again, + 0.0 after it
    ("softmax_problem", "softmax_torch", "calls the problem's own torch op (softmax) for the whole computation"),
    ("swish_problem", "swish_torch", "calls the problem's own torch ops (sigmoid, mul) for the whole computation"),
    ("layernorm_problem", "layernorm_torch", "calls the problem's own torch op (layer_norm) for the whole computation"),
    ("softmax_problem", "softmax_exp", None),  # softmax as exp / sum
    ("softmax_problem", "softmax_naive", None),
    ("rowmean_problem", "rowmean_triton", None),  # a Triton kernel
    ("swish_problem", "swish_exp", None),
])
def test_what_is_flagged(problem, candidate, expected):
    assert found(problem, candidate) == expected


def test_strict_fails_a_flagged_kernel_only():
    kernels = [{"name": "a", "passed": True, "verdict": "pass (forward only)", "shortcut": shortcut.MODEL},
               {"name": "b", "passed": True, "verdict": "pass (forward only)", "shortcut": None}]
    shortcut.apply_strict(kernels, strict=False)
    assert all(k["passed"] for k in kernels)
    shortcut.apply_strict(kernels, strict=True)
    assert not kernels[0]["passed"] and kernels[0]["failure_class"] == "shortcut" and kernels[1]["passed"]
