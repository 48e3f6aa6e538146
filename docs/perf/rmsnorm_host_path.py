"""Run 21 of docs/gpu-runs.md (2026-11-29; perf-notes attempt 17), and the experiments after it: the
first table is run 21; the autograd experiments after it have not run on a GPU yet.

Run on a GPU from the repository root: python3 docs/perf/rmsnorm_host_path.py

Where the host time of triton_rmsnorm goes at 128x257 fp32 (launch-bound): per piece, host
microseconds per call (perf_counter over 2000 calls, no sync inside).
"""
import sys, time
sys.path.insert(0, '.')
import torch, triton
import kernels.rmsnorm as K

def host_us(fn, n=2000):
    for _ in range(200): fn()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): fn()
    torch.cuda.synchronize(); return (time.perf_counter() - t) / n * 1e6

M, N = 128, 257
x = torch.randn(M, N, device='cuda'); g = torch.randn(N, device='cuda'); dy = torch.randn(M, N, device='cuda')
y = torch.empty_like(x); r = torch.empty(M, device='cuda'); B = triton.next_power_of_2(N); rows = K._rows_per_tile(B)
grid = (triton.cdiv(M, rows),)
xg = x.detach().requires_grad_(True); gg = g.detach().requires_grad_(True)
pieces = {
    "empty launch of torch (x.add_(0))": lambda: x.add_(0),
    "torch F.rms_norm forward": lambda: torch.nn.functional.rms_norm(x, (N,), g, 1e-6),
    "check_contract": lambda: K.check_contract(x, g, 1e-6),
    "two torch.empty": lambda: (torch.empty((M, N), dtype=x.dtype, device=x.device), torch.empty(M, dtype=torch.float32, device=x.device)),
    "bare forward launch (JITFunction.run)": lambda: K._rmsnorm_forward[grid](x, g, y, r, M, N, x.stride(0), x.stride(1), g.stride(0), 1e-6, ROWS=rows, BLOCK=B, num_warps=K._num_warps(B)),
    "_forward (allocs + launch)": lambda: K._forward(x, g, 1e-6),
    "API forward, no grad": lambda: K.rmsnorm(x, g, 1e-6),
    "_backward (allocs + 2 launches)": lambda: K._backward(x, g, dy, r),
    "get_device_properties": lambda: torch.cuda.get_device_properties(x.device),
    "API forward+backward (autograd.grad)": lambda: torch.autograd.grad(K.rmsnorm(xg, gg, 1e-6), (xg, gg), dy),
    "F.rms_norm forward+backward": lambda: torch.autograd.grad(torch.nn.functional.rms_norm(xg, (N,), gg, 1e-6), (xg, gg), dy),
}
for name, fn in pieces.items():
    with torch.no_grad() if "backward" not in name else torch.enable_grad():
        print(f"{name:42s} host {host_us(fn):7.1f} us/call", flush=True)
print(torch.__version__, triton.__version__)

# --- where do the ~420 us of the autograd path go? (run 21 left this open) ---
import threading
from torch.autograd.function import once_differentiable

def in_thread(fn, n=500):
    out = {}
    def body():
        torch.cuda.set_device(0)
        out["us"] = host_us(fn, n)
    t = threading.Thread(target=body); t.start(); t.join(); return out["us"]

print(f"{'_backward from another Python thread':42s} host {in_thread(lambda: K._backward(x, g, dy, r)):7.1f} us/call", flush=True)
dx0, dg0 = K._backward(x, g, dy, r)

class Stub(torch.autograd.Function):  # autograd engine only: no launch in backward
    @staticmethod
    def forward(ctx, a, b):
        return a.clone()
    @staticmethod
    def backward(ctx, d):
        return dx0, dg0

class TorchOnly(torch.autograd.Function):  # torch ops in backward
    @staticmethod
    def forward(ctx, a, b):
        return a.clone()
    @staticmethod
    def backward(ctx, d):
        return d * 2, d.sum(0)

class TritonNoOnce(torch.autograd.Function):  # the project's kernels, without once_differentiable
    @staticmethod
    def forward(ctx, a, b):
        y, rs = K._forward(a, b, 1e-6); ctx.save_for_backward(a, b, rs); return y
    @staticmethod
    def backward(ctx, d):
        a, b, rs = ctx.saved_tensors
        return K._backward(a, b, d, rs)

class TritonForwardOnly(torch.autograd.Function):  # a Triton launch in forward, none in backward
    @staticmethod
    def forward(ctx, a, b):
        y, rs = K._forward(a, b, 1e-6); return y
    @staticmethod
    def backward(ctx, d):
        return dx0, dg0

with torch.enable_grad():
    for name, F in [("Stub", Stub), ("TorchOnly", TorchOnly), ("TritonNoOnce", TritonNoOnce), ("TritonForwardOnly", TritonForwardOnly)]:
        fn = lambda F=F: torch.autograd.grad(F.apply(xg, gg), (xg, gg), dy)
        print(f"{'autograd.grad of ' + name:42s} host {host_us(fn, 1000):7.1f} us/call", flush=True)
    print(f"{'API fwd+bwd, 3000 calls (steady state?)':42s} host {host_us(lambda: torch.autograd.grad(K.rmsnorm(xg, gg, 1e-6), (xg, gg), dy), 3000):7.1f} us/call")
import sys as _s; print("switchinterval", _s.getswitchinterval(), "threads", threading.active_count())
