"""Run 2 of docs/gpu-runs.md: warps x programs-per-SM sweep of the backward. Written against the
kernel of commit 1319736 (``_programs_for``); the kernel now plans its launch in ``_backward_plan``.

Run on a GPU from the repository root: python3 docs/perf/rmsnorm_launch_sweep.py
Variants of the project's RMSNorm launch parameters, seed protocol, one run."""
import sys, itertools
sys.path.insert(0, '.')
import torch, triton
from harness.workflows.benchmark import TUTORIAL_PROTOCOL, CudaClock, summarize, time_calls
import kernels.rmsnorm as K

def med(fn):
    """Median microseconds per call, the seed protocol (harness.workflows.benchmark)."""
    return summarize(time_calls(fn, TUTORIAL_PROTOCOL, CudaClock()))["median_us"]

orig_w, orig_p = K._num_warps, K._programs_for
sms = torch.cuda.get_device_properties(0).multi_processor_count
for (M,N,dt) in [(32768,4096,torch.bfloat16),(128,257,torch.float32)]:
    x=torch.randn(M,N,device='cuda',dtype=dt,requires_grad=True); g=torch.randn(N,device='cuda',dtype=dt,requires_grad=True); dy=torch.randn(M,N,device='cuda',dtype=dt)
    def fwd():
        with torch.no_grad(): K.rmsnorm(x,g,1e-6)
    def fb():
        y=K.rmsnorm(x,g,1e-6); torch.autograd.grad(y,(x,g),dy)
    for warps, pmul in itertools.product((4, 8, 16, 32), (1, 2, 4, 8)):
        if N < 1024 and warps > 8: continue
        K._num_warps = lambda block, w=warps: w
        K._programs_for = lambda m, dev, k=pmul: max(1, min(m, k*sms))
        f = med(fwd) if pmul == 1 else float('nan')
        b = med(fb)
        print(f"{M}x{N} {dt} warps={warps} programs={pmul}xSM: fwd {f:.1f} us  fwd+bwd {b:.1f} us", flush=True)
    K._num_warps, K._programs_for = orig_w, orig_p
