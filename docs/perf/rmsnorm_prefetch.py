"""The host path after the cached launch, and a backward that loads the next row while it reduces
the current one (GPU run 46, 2026-12-02/03, docs/gpu-runs.md).

Run on a GPU from the repository root: python3 docs/perf/rmsnorm_prefetch.py

Part A, 128x257 fp32 (launch-bound): host microseconds per call of each piece of the path, the
standard Triton launch against kernels._launch.launch, and the whole calls against torch.
Part B, 32768x4096 bf16 backward kernel alone (CUDA events, median of 30 samples of 10 calls):
the project's backward (4 programs per SM, one row per iteration) against a variant whose loop
issues the next row's loads before this row's reduction (registers double-buffered), at 1/2/4/8
programs per SM and 4/8/16 warps; each variant's dx and dgamma are compared with the project's.
"""
import statistics
import sys
import time

sys.path.insert(0, ".")
import torch
import triton
import triton.language as tl
from triton import knobs
from triton.runtime import driver

import kernels.rmsnorm as K
from kernels._launch import launch


def host_us(fn, n=2000):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def gpu_us(fn, samples=30, calls=10):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(out)


print(torch.__version__, triton.__version__, torch.cuda.get_device_name(), flush=True)

# ---------------- Part A ----------------
M, N = 128, 257
x = torch.randn(M, N, device="cuda")
g = torch.randn(N, device="cuda")
dy = torch.randn(M, N, device="cuda")
y = torch.empty_like(x)
r = torch.empty(M, device="cuda")
B = triton.next_power_of_2(N)
rows = K._rows_per_tile(B)
grid = (triton.cdiv(M, rows),)
fargs = (x, g, y, r, M, N, x.stride(0), x.stride(1), g.stride(0), 1e-6)
fkw = dict(ROWS=rows, BLOCK=B, STORE_RSTD=True, num_warps=K._num_warps(B))
launch(K._rmsnorm_forward, grid, *fargs, **fkw)
dev = torch.cuda.current_device()
binder = K._rmsnorm_forward.device_caches[dev][4]
kern = next(iter(K._rmsnorm_forward.__dict__["_project_launch_cache"].values()))
bound = binder(*fargs, **fkw, debug=False, instrumentation_mode=knobs.compilation.instrumentation_mode)[0]
stream = driver.active.get_current_stream(dev)
xg = x.detach().requires_grad_(True)
gg = g.detach().requires_grad_(True)


def fwd_bwd(f):
    return lambda: torch.autograd.grad(f(xg, gg, 1e-6), (xg, gg), dy)


class Standard(torch.autograd.Function):  # the earlier path: fn[grid], rstd always kept
    @staticmethod
    def forward(ctx, a, b, eps):
        yy = torch.empty_like(a)
        rr = torch.empty(M, device="cuda")
        K._rmsnorm_forward[grid](a, b, yy, rr, M, N, a.stride(0), a.stride(1), b.stride(0), eps, **fkw)
        ctx.save_for_backward(a, b, rr)
        return yy

    @staticmethod
    def backward(ctx, d):
        a, b, rr = ctx.saved_tensors
        programs = min(M, 4 * torch.cuda.get_device_properties(a.device).multi_processor_count)
        per = triton.cdiv(M, programs)
        programs = triton.cdiv(M, per)
        dx = torch.empty_like(a)
        dg = torch.empty(N, device="cuda")
        part = torch.empty((programs, N), device="cuda")
        K._rmsnorm_backward[(programs,)](a, b, d, rr, dx, part, M, N, a.stride(0), a.stride(1), b.stride(0),
                                         d.stride(0), d.stride(1), per, ROWS=1, BLOCK=B, num_warps=K._num_warps(B))
        K._sum_partials[(triton.cdiv(N, 128),)](part, dg, programs, N, BLOCK_P=32, BLOCK_N=128)
        return dx, dg, None


pieces = {
    "torch.empty (one)": lambda: torch.empty((M, N), device="cuda"),
    "check_contract": lambda: K.check_contract(x, g, 1e-6),
    "get_current_stream (driver)": lambda: driver.active.get_current_stream(dev),
    "binder (Triton's specialisation)": lambda: binder(*fargs, **fkw, debug=False, instrumentation_mode=None),
    "CompiledKernel.run direct": lambda: kern.run(grid[0], 1, 1, stream, kern.function, kern.packed_metadata,
                                                  None, None, None, *bound.values()),
    "fn[grid] (JITFunction.run)": lambda: K._rmsnorm_forward[grid](*fargs, **fkw),
    "launch(fn, grid) (cached)": lambda: launch(K._rmsnorm_forward, grid, *fargs, **fkw),
    "get_device_properties": lambda: torch.cuda.get_device_properties(x.device),
}
with torch.no_grad():
    for name, fn in pieces.items():
        print(f"A host {name:44s} {host_us(fn):7.1f} us", flush=True)
    for name, fn in {"forward: torch F.rms_norm": lambda: torch.nn.functional.rms_norm(x, (N,), g, 1e-6),
                     "forward: standard path (Function, fn[grid])": lambda: Standard.apply(x, g, 1e-6),
                     "forward: project API (no grad, cached launch)": lambda: K.rmsnorm(x, g, 1e-6)}.items():
        print(f"A host {name:44s} {host_us(fn):7.1f} us   gpu-events {gpu_us(fn, 50, 20):7.1f} us", flush=True)
with torch.enable_grad():
    for name, fn in {"fwd+bwd: torch F.rms_norm": fwd_bwd(lambda a, b, e: torch.nn.functional.rms_norm(a, (N,), b, e)),
                     "fwd+bwd: standard path": fwd_bwd(Standard.apply),
                     "fwd+bwd: project API": fwd_bwd(K.rmsnorm)}.items():
        print(f"A host {name:44s} {host_us(fn, 1000):7.1f} us   gpu-events {gpu_us(fn, 50, 20):7.1f} us", flush=True)


# ---------------- Part B ----------------
@triton.jit
def bwd_prefetch(X, G, DY, RSTD, DX, PARTIAL, M, N, stride_xm, stride_xn, stride_g, stride_dym, stride_dyn,
                 rows_per_program, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK).to(tl.int64)
    col_mask = cols < N
    g = tl.load(G + cols * stride_g, mask=col_mask, other=0.0).to(tl.float32)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    first = pid.to(tl.int64) * rows_per_program
    last = tl.minimum(first + rows_per_program, M)
    m0 = col_mask & (first < last)
    x = tl.load(X + first * stride_xm + cols * stride_xn, mask=m0, other=0.0)
    dy = tl.load(DY + first * stride_dym + cols * stride_dyn, mask=m0, other=0.0)
    rstd = tl.load(RSTD + first, mask=first < last, other=0.0)
    for row in range(first, last):
        nxt = row + 1
        mn = col_mask & (nxt < last)
        x_next = tl.load(X + nxt * stride_xm + cols * stride_xn, mask=mn, other=0.0)
        dy_next = tl.load(DY + nxt * stride_dym + cols * stride_dyn, mask=mn, other=0.0)
        rstd_next = tl.load(RSTD + nxt, mask=nxt < last, other=0.0)
        xf = x.to(tl.float32)
        dyf = dy.to(tl.float32)
        u = dyf * g
        mean_ux = tl.sum(u * xf, axis=0) / N
        dx = rstd * u - xf * (rstd * rstd * rstd * mean_ux)
        tl.store(DX + row * N + cols, dx.to(DX.dtype.element_ty), mask=col_mask)
        acc += dyf * xf * rstd
        x, dy, rstd = x_next, dy_next, rstd_next
    tl.store(PARTIAL + pid.to(tl.int64) * N + cols, acc, mask=col_mask)


M2, N2 = 32768, 4096
dt = torch.bfloat16
x2 = torch.randn(M2, N2, device="cuda", dtype=dt)
g2 = (torch.randn(N2, device="cuda") * 0.5 + 1).to(dt)
dy2 = torch.randn(M2, N2, device="cuda", dtype=dt)
_, r2 = K._forward(x2, g2, 1e-6)
dx_ref, dg_ref = K._backward(x2, g2, dy2, r2)
sms = torch.cuda.get_device_properties(0).multi_processor_count
B2 = triton.next_power_of_2(N2)
print(f"B project _backward (4/SM, 1 row, {K._num_warps(B2)} warps) kernel+reduce "
      f"{gpu_us(lambda: K._backward(x2, g2, dy2, r2)):7.1f} us", flush=True)
for per_sm in (1, 2, 4, 8):
    programs = min(M2, per_sm * sms)
    per = triton.cdiv(M2, programs)
    programs = triton.cdiv(M2, per)
    part = torch.empty((programs, N2), device="cuda")
    dx = torch.empty_like(x2)
    dg = torch.empty(N2, device="cuda", dtype=dt)
    for warps in (4, 8, 16):
        def run():
            bwd_prefetch[(programs,)](x2, g2, dy2, r2, dx, part, M2, N2, x2.stride(0), x2.stride(1), g2.stride(0),
                                      dy2.stride(0), dy2.stride(1), per, BLOCK=B2, num_warps=warps)
            K._sum_partials[(triton.cdiv(N2, 128),)](part, dg, programs, N2, BLOCK_P=32, BLOCK_N=128)
        us = gpu_us(run)
        err_dx = (dx.float() - dx_ref.float()).abs().max().item()
        err_dg = (dg.float() - dg_ref.float()).abs().max().item()
        print(f"B prefetch {per_sm}/SM {warps:2d} warps {us:7.1f} us   max|dx-project| {err_dx:.3g} "
              f"max|dgamma-project| {err_dg:.3g}", flush=True)

xg2 = x2.detach().requires_grad_(True)
gg2 = g2.detach().requires_grad_(True)
print(f"B project API fwd+bwd 32768x4096 bf16 (autograd) "
      f"{gpu_us(lambda: torch.autograd.grad(K.rmsnorm(xg2, gg2, 1e-6), (xg2, gg2), dy2)):7.1f} us", flush=True)
