"""A total variation distance loss declared from one torch reference (``from_reference``), as
Liger-Kernel's ``LigerTVDLoss`` computes it, and two kernels of it:

    python -m harness verify --plugin examples/plugins/tvd_loss.py --op tvd_loss --backend interpreter

``tvd_loss(p[N, V], q[N, V], labels[N], ignore_index, reduction) = 0.5 |p - q|`` per element, rows
whose label is ``ignore_index`` left out, reduced by ``reduction`` (none; sum; batchmean: / the
rows kept; mean: / (rows kept x V)). p and q are distributions (rows summing to 1: the
PROBABILITIES value kinds, whose zeros tie, p == q); the gradient is taken for p only (q is a
target: ``no_grad``); labels may be ``ignore_index`` (``ignore_index``); each reduction is a case
of its own (``options``).

At p == q, |p - q| has its kink: the gradient there is 0 (sign(0) = 0, torch's subgradient: an
exact match is not pushed). ``tvd_sign_as_liger`` takes ``where(p > q, 0.5, -0.5)``, as
Liger-Kernel's ``_tv_distance_kernel`` does, so every tie of p and q gets -0.5 and it fails the
cases whose p and q share zeros (``sparse_probs``, ``one_hot``); ``tvd_torch`` takes the sign and passes.
"""

import torch

from harness import from_reference, register_kernel
from harness.ops.row_kinds import PROBABILITIES

REDUCTIONS = ("batchmean", "sum", "mean", "none")


def tvd_reference(p, q, labels, ignore_index, reduction):
    keep = (labels != ignore_index).unsqueeze(-1).to(p.dtype)
    loss = 0.5 * (p - q).abs() * keep
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    kept = keep.sum()
    return loss.sum() / (kept if reduction == "batchmean" else kept * p.shape[-1])


_gen = torch.Generator().manual_seed(0)
EXAMPLE = (torch.softmax(torch.randn(8, 33, generator=_gen), -1), torch.softmax(torch.randn(8, 33, generator=_gen), -1),
           torch.tensor([3, -100, 0, 32, 7, -100, 1, 2]), -100, "batchmean")

op = from_reference(tvd_reference, EXAMPLE, vary={"p": ("N", "V"), "q": ("N", "V"), "labels": ("N",)},
                    name="tvd_loss", no_grad=("q",), input_kinds={"p": PROBABILITIES, "q": PROBABILITIES},
                    ignore_index="ignore_index", options={"reduction": REDUCTIONS},
                    doc=__doc__)


class _TVD(torch.autograd.Function):
    """The loss and dp computed together in fp32 (as a fused kernel does); backward scales the
    stored dp by the upstream gradient (per element for reduction='none')."""

    @staticmethod
    def forward(ctx, p, q, labels, ignore_index, reduction, half_sign):
        pf, qf = p.float(), q.float()
        keep = (labels != ignore_index).unsqueeze(-1)
        loss = torch.where(keep, 0.5 * (pf - qf).abs(), 0.0)
        kept = int(keep.sum())
        scale = {"none": 1.0, "sum": 1.0, "batchmean": 1.0 / kept if kept else float("nan"),
                 "mean": 1.0 / (kept * p.shape[-1]) if kept else float("nan")}[reduction]
        ctx.save_for_backward(torch.where(keep, half_sign(pf, qf) * scale, 0.0))  # an ignored row's dp is 0
        ctx.dtype = p.dtype
        out = loss if reduction == "none" else loss.sum() * (1.0 if reduction == "sum" else scale)
        return out.to(p.dtype)

    @staticmethod
    def backward(ctx, dy):
        (dp,) = ctx.saved_tensors
        return (dp * dy.float()).to(ctx.dtype), None, None, None, None, None


@register_kernel("tvd_loss", name="tvd_torch", description="fp32, dp = sign(p - q) / 2: 0 where p == q")
def tvd_torch(p, q, labels, ignore_index, reduction):
    return _TVD.apply(p, q, labels, ignore_index, reduction, lambda a, b: 0.5 * torch.sign(a - b))


@register_kernel("tvd_loss", name="tvd_sign_as_liger", description="dp = where(p > q, 0.5, -0.5): -0.5 where p == q")
def tvd_sign_as_liger(p, q, labels, ignore_index, reduction):
    return _TVD.apply(p, q, labels, ignore_index, reduction, lambda a, b: torch.where(a > b, 0.5, -0.5))
