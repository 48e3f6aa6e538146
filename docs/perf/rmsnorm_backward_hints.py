"""Run 17 of docs/gpu-runs.md (perf-notes attempt 14; nothing adopted).

Run on a GPU from the repository root: python3 docs/perf/rmsnorm_backward_hints.py

RMSNorm backward at 32768x4096 bf16: cache hints and unrolling on the 1-row loop (kernel only).
"""
import sys
sys.path.insert(0, '.')
import torch, triton, triton.language as tl
import kernels.rmsnorm as K
from oracles.rmsnorm import rmsnorm_backward

@triton.jit
def bwd(X, G, DY, RSTD, DX, PARTIAL, M, N, stride_xm, stride_xn, stride_g, stride_dym, stride_dyn,
        rows_per_program, BLOCK: tl.constexpr, EVICT: tl.constexpr, STREAM: tl.constexpr, UNROLL: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    cmask = cols < N
    g = tl.load(G + cols * stride_g, mask=cmask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    first = pid.to(tl.int64) * rows_per_program
    last = tl.minimum(first + rows_per_program, M)
    for row in tl.range(first, last, loop_unroll_factor=UNROLL):
        if EVICT:
            x = tl.load(X + row * stride_xm + cols * stride_xn, mask=cmask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            dy = tl.load(DY + row * stride_dym + cols * stride_dyn, mask=cmask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        else:
            x = tl.load(X + row * stride_xm + cols * stride_xn, mask=cmask, other=0.0).to(tl.float32)
            dy = tl.load(DY + row * stride_dym + cols * stride_dyn, mask=cmask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD + row)
        u = dy * g
        mean_ux = tl.sum(u * x, axis=0) / N
        dx = rstd * u - x * (rstd * rstd * rstd * mean_ux)
        if STREAM:
            tl.store(DX + row * N + cols, dx.to(DX.dtype.element_ty), mask=cmask, cache_modifier=".cs")
        else:
            tl.store(DX + row * N + cols, dx.to(DX.dtype.element_ty), mask=cmask)
        acc += dy * x * rstd
    tl.store(PARTIAL + pid.to(tl.int64) * N + cols, acc, mask=cmask)

def med(fn, n=20):
    for _ in range(20): fn()
    torch.cuda.synchronize(); s=[]
    for _ in range(50):
        a=torch.cuda.Event(enable_timing=True); b=torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n): fn()
        b.record(); torch.cuda.synchronize(); s.append(a.elapsed_time(b)*1000/n)
    s.sort(); return s[25]

sms = torch.cuda.get_device_properties(0).multi_processor_count
M, N, dt = 32768, 4096, torch.bfloat16
x=torch.randn(M,N,device='cuda',dtype=dt); g=torch.randn(N,device='cuda',dtype=dt); dy=torch.randn(M,N,device='cuda',dtype=dt)
rstd = torch.rsqrt(x.float().pow(2).mean(1) + 1e-6)
dxr, dgr = rmsnorm_backward(x, g, dy, 1e-6)
B = 4096; dx = torch.empty_like(x); dg = torch.empty(N, device='cuda', dtype=dt)
def cur():
    return K._backward(x, g, dy, rstd)
print(f"current _backward (kernel + partial sum, through Python): {med(cur):.1f} us", flush=True)
for evict, stream, unroll, pmul, warps in [(0,0,1,4,8),(1,0,1,4,8),(0,1,1,4,8),(1,1,1,4,8),(1,1,2,4,8),(0,0,2,4,8),(1,1,1,2,16),(1,1,1,8,4),(1,1,2,2,8)]:
    programs=max(1,min(M,pmul*sms)); rpp=triton.cdiv(M,programs); programs=triton.cdiv(M,rpp)
    partial=torch.empty((programs,N),device='cuda',dtype=torch.float32)
    def b():
        bwd[(programs,)](x,g,dy,rstd,dx,partial,M,N,x.stride(0),x.stride(1),g.stride(0),dy.stride(0),dy.stride(1),rpp,
                         BLOCK=B,EVICT=evict,STREAM=stream,UNROLL=unroll,num_warps=warps)
        K._sum_partials[(triton.cdiv(N,128),)](partial,dg,programs,N,BLOCK_P=32,BLOCK_N=128)
    try:
        b(); torch.cuda.synchronize()
        e1=((dx.double()-dxr).abs().max()).item(); e2=((dg.double()-dgr).abs().max()/dgr.abs().max()).item()
        print(f"evict={evict} stream={stream} unroll={unroll} programs={pmul}xSM warps={warps}: {med(b):.1f} us  dx maxerr {e1:.2e} dgamma rel {e2:.2e}", flush=True)
    except Exception as exc:
        print(f"evict={evict} stream={stream} unroll={unroll}: FAILED {type(exc).__name__}: {str(exc)[:300]}", flush=True)
