"""The README's five-minute example: a plain torch RMSNorm registered as a kernel, and the same
kernel with the classic bug (dividing the sum of squares by a block size, 256, instead of N).

    python -m harness verify --plugin examples/plugins/quickstart_rmsnorm.py --select 'my_*' --backend interpreter --max-examples 5

my_rmsnorm passes; my_rmsnorm_bug passes every N = 256 case and fails the others, each failure
with its case id and a one-line repro.
"""

import torch

from harness import register_kernel


@register_kernel("rmsnorm", name="my_rmsnorm")
def my_rmsnorm(x, gamma, eps):  # x[M, N], gamma[N], eps -> y[M, N] in x's dtype
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * rstd * gamma.float()).to(x.dtype)


@register_kernel("rmsnorm", name="my_rmsnorm_bug")
def my_rmsnorm_bug(x, gamma, eps):  # divides by a block size (256), not by N
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).sum(-1, keepdim=True) / 256 + eps)
    return (xf * rstd * gamma.float()).to(x.dtype)
