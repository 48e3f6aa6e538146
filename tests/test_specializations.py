"""harness.run.specializations: the Triton specializations a suite would compile on CUDA, counted on
the interpreter from Triton's own key of each launch (dtypes, constexprs, ints equal to 1 or
divisible by 16, 16-byte alignment; ``do_not_specialize`` honoured), carried per case to verify."""

import torch
import triton
import triton.language as tl

from harness.registry.registry import REGISTRY, Contract, KernelEntry
from harness.run import specializations
from harness.run.runner import run_case


@triton.jit
def _copy(X, Y, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(Y + i, tl.load(X + i, mask=i < n), mask=i < n)


@triton.jit(do_not_specialize=["n"])
def _copy_runtime_n(X, Y, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(Y + i, tl.load(X + i, mask=i < n), mask=i < n)


def _launch(kernel, dtype, n):
    x = torch.zeros(64, dtype=dtype)
    kernel[(1,)](x, torch.empty_like(x), n, BLOCK=64)


def test_one_key_per_dtype_constexpr_and_int_pattern():
    specializations.install()
    specializations.drain()
    for dtype, n in ((torch.float32, 16), (torch.float32, 32), (torch.float32, 7), (torch.float32, 9),
                     (torch.float32, 1), (torch.float16, 16)):
        _launch(_copy, dtype, n)
    keys = specializations.drain()
    # 16 and 32 share "divisible by 16", 7 and 9 share "neither", 1 is its own, fp16 its own
    assert len(keys) == 4, keys
    assert specializations.drain() == ()


def test_do_not_specialize_keeps_an_int_out_of_the_key():
    specializations.install()
    specializations.drain()
    for n in (1, 7, 16):
        _launch(_copy_runtime_n, torch.float32, n)
    assert len(specializations.drain()) == 1


def test_a_case_records_the_keys_its_calls_launched():
    spec = REGISTRY.op("softmax")
    case = spec.floor_cases(backend="interpreter")[0]
    entry = REGISTRY.get("softmax", "triton_softmax")
    run = run_case(spec, KernelEntry("softmax", "k", entry.fn, Contract(), "kernel", "test", "here"), case,
                   backend="interpreter", device="cpu")
    keys = run.records[0].specializations
    assert keys and all(k.startswith("kernels.softmax._softmax") for k in keys)
