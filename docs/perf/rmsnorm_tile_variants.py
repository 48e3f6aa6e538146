"""Run 3 of docs/gpu-runs.md: [ROWS, BLOCK] forward and backward tile candidates, kernel-only
timings and a cProfile of the 128x257 launch path. The forward tile variant became the project's kernel.

Run on a GPU from the repository root: python3 docs/perf/rmsnorm_tile_variants.py
Candidate RMSNorm kernels (2-D row tiles) vs the current ones; correctness vs float64 and timing."""
import sys, cProfile, pstats, io
sys.path.insert(0, '.')
import torch, triton, triton.language as tl
from harness.workflows.benchmark import TUTORIAL_PROTOCOL, CudaClock, summarize, time_calls
import kernels.rmsnorm as K
from oracles.rmsnorm import rmsnorm_reference, rmsnorm_backward

@triton.jit
def fwd_tile(X, G, Y, RSTD, M, stride_xm, stride_xn, stride_g, N, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    rmask = rows < M
    mask = rmask[:, None] & (cols[None, :] < N)
    x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(G + cols * stride_g, mask=cols < N, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / N + eps)
    tl.store(Y + rows[:, None] * N + cols[None, :], (x * rstd[:, None] * g[None, :]).to(Y.dtype.element_ty), mask=mask)
    tl.store(RSTD + rows, rstd, mask=rmask)

@triton.jit
def bwd_tile(X, G, DY, RSTD, DX, PARTIAL, M, N, stride_xm, stride_xn, stride_g, stride_dym, stride_dyn,
             rows_per_program, ROWS: tl.constexpr, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    cmask = cols < N
    g = tl.load(G + cols * stride_g, mask=cmask, other=0.0).to(tl.float32)
    acc = tl.zeros([ROWS, BLOCK], dtype=tl.float32)
    first = pid.to(tl.int64) * rows_per_program
    last = tl.minimum(first + rows_per_program, M)
    for start in tl.range(first, last, ROWS, num_stages=STAGES):
        rows = start + tl.arange(0, ROWS)
        rmask = rows < last
        mask = rmask[:, None] & cmask[None, :]
        x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + rows[:, None] * stride_dym + cols[None, :] * stride_dyn, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(RSTD + rows, mask=rmask, other=0.0)
        u = dy * g[None, :]
        mean_ux = tl.sum(u * x, axis=1) / N
        dx = rstd[:, None] * u - x * (rstd * rstd * rstd * mean_ux)[:, None]
        tl.store(DX + rows[:, None] * N + cols[None, :], dx.to(DX.dtype.element_ty), mask=mask)
        acc += dy * x * rstd[:, None]
    tl.store(PARTIAL + pid.to(tl.int64) * N + cols, tl.sum(acc, axis=0), mask=cmask)

def med(fn):
    """Median microseconds per call, the seed protocol (harness.workflows.benchmark)."""
    return summarize(time_calls(fn, TUTORIAL_PROTOCOL, CudaClock()))["median_us"]

sms = torch.cuda.get_device_properties(0).multi_processor_count
for (M,N,dt) in [(32768,4096,torch.bfloat16),(128,257,torch.float32),(4096, 8192, torch.bfloat16)]:
    x=torch.randn(M,N,device='cuda',dtype=dt); g=torch.randn(N,device='cuda',dtype=dt); dy=torch.randn(M,N,device='cuda',dtype=dt)
    y=torch.empty_like(x); r=torch.empty(M,device='cuda',dtype=torch.float32); B=triton.next_power_of_2(N)
    ref = rmsnorm_reference(x, g, 1e-6); dxr, dgr = rmsnorm_backward(x, g, dy, 1e-6)
    K._rmsnorm_forward[(M,)](x,g,y,r,x.stride(0),x.stride(1),g.stride(0),N,1e-6,BLOCK=B,num_warps=8)
    print(f"{M}x{N} {dt} current fwd kernel only: {med(lambda: K._rmsnorm_forward[(M,)](x,g,y,r,x.stride(0),x.stride(1),g.stride(0),N,1e-6,BLOCK=B,num_warps=8)):.1f} us")
    for rows, warps in [(1,4),(1,8),(2,8),(2,16),(4,8),(4,16)]:
        if rows*B > 16384: continue
        grid=(triton.cdiv(M,rows),)
        f=lambda: fwd_tile[grid](x,g,y,r,M,x.stride(0),x.stride(1),g.stride(0),N,1e-6,ROWS=rows,BLOCK=B,num_warps=warps)
        f(); err=(y.double()-ref).abs().max().item()
        print(f"  fwd_tile rows={rows} warps={warps}: {med(f):.1f} us  maxerr {err:.2e}")
    dx=torch.empty_like(x)
    for rows, warps, pmul, stages in [(1,8,4,1),(1,8,4,2),(2,8,2,1),(2,16,2,1),(2,8,4,2),(2,16,4,2),(4,16,2,1),(4,16,2,2),(2,8,1,2),(4,16,1,2)]:
        if rows*B > 16384: continue
        programs=max(1,min(M,pmul*sms)); rpp=triton.cdiv(M,programs); programs=triton.cdiv(M,rpp)
        partial=torch.empty((programs,N),device='cuda',dtype=torch.float32); dg=torch.empty(N,device='cuda',dtype=dt)
        def b():
            bwd_tile[(programs,)](x,g,dy,r,dx,partial,M,N,x.stride(0),x.stride(1),g.stride(0),dy.stride(0),dy.stride(1),rpp,ROWS=rows,BLOCK=B,STAGES=stages,num_warps=warps)
            bn=min(B,128); K._sum_partials[(triton.cdiv(N,bn),)](partial,dg,programs,N,BLOCK_P=32,BLOCK_N=bn)
        try:
            b(); e1=((dx.double()-dxr).abs().max()).item(); e2=((dg.double()-dgr).abs().max()).item()
            print(f"  bwd_tile rows={rows} warps={warps} programs={pmul}xSM stages={stages}: {med(b):.1f} us  errs {e1:.2e} {e2:.2e}")
        except Exception as exc:
            print(f"  bwd_tile rows={rows} warps={warps} stages={stages}: FAILED {type(exc).__name__}: {str(exc)[:200]}")

# where does the time go at 128x257?
x=torch.randn(128,257,device='cuda',requires_grad=True); g=torch.randn(257,device='cuda',requires_grad=True); dy=torch.randn(128,257,device='cuda')
def fb():
    y=K.rmsnorm(x,g,1e-6); torch.autograd.grad(y,(x,g),dy)
for _ in range(50): fb()
torch.cuda.synchronize()
pr=cProfile.Profile(); pr.enable()
for _ in range(300): fb()
torch.cuda.synchronize(); pr.disable()
s=io.StringIO(); pstats.Stats(pr,stream=s).sort_stats('tottime').print_stats(22); print(s.getvalue()[-5000:])
