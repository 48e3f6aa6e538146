"""bench/fused_linear_cross_entropy.py on the CPU: the workloads hold the Llama-3-8B-sized head, and the
implementations that can run here agree on a small input (a wrongly wired column would not)."""

import torch

import bench.fused_linear_cross_entropy as bf
from harness.workflows.benchmark import Unavailable


def test_workloads_include_the_llama_head_shape_with_three_matmuls_of_flops():
    names = [w.name for w in bf.workloads()]
    assert "N=16384 D=4096 V=128256 bf16" in names
    big = next(w for w in bf.workloads() if not w.quick)
    assert big.flops["forward+backward"] == 3 * 2.0 * 16384 * 4096 * 128256


def test_implementations_agree_on_a_small_input(device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20, 16, generator=g).to(device)
    w = torch.randn(70, 16, generator=g).to(device)
    t = torch.randint(70, (20,), generator=g).to(device)
    t[3] = bf.IGNORE_INDEX
    impls = bf.implementations()
    assert list(impls)[0] == "triton_flce (project)"
    expected = torch.nn.functional.cross_entropy(x.double() @ w.double().T, t)
    for name, fn in impls.items():
        if isinstance(fn, Unavailable):  # Liger where it is not installed: the bench skips it too
            continue
        # fp32 inputs, D = 16, loss about 9.5: the implementations are within 1.1e-6 of float64 (about
        # one fp32 ulp there); 1e-6 + 1e-5 * 9.5 allows 9.6e-5, far below a wrong loss (ignored row
        # counted, missing max subtraction, wrong mean), which is off by 1e-2 or more
        torch.testing.assert_close(fn(x, w, t, bf.IGNORE_INDEX).double(), expected, rtol=1e-5, atol=1e-6, msg=name)
