"""Fused linear cross-entropy with ``reduction`` 'none', 'mean' or 'sum', declared from one torch
reference (``from_reference``), and two kernels of it:

    python -m harness verify --plugin examples/plugins/flce_rows.py --op flce_rows --backend interpreter

``flce_rows(x[N, D], weight[V, D], target[N], ignore_index, reduction) =
F.cross_entropy(x @ weight.T, target, ignore_index=ignore_index, reduction=reduction)``: with
'none' one loss per row ([N], 0 on an ignored row), else a scalar. Each reduction is a case of its
own (``options``), targets may be ``ignore_index`` (``ignore_index``), and with 'none' the upstream
gradient is a random vector, one value per row.

A kernel that computes the gradients in the forward (as Liger-Kernel's fused linear
cross-entropy does, to never hold the logits) must scale each row's by that row's upstream
gradient. ``flce_first_upstream`` scales them all by ``grad_output[0]``, the value a kernel that
reads the upstream gradient as a scalar takes: right for 'mean' and 'sum' (one upstream value),
wrong for 'none' on every row whose upstream value differs from the first; ``flce_torch`` scales
per row. Where a gradient's sum over classes cancels (two classes' weights near or exactly
equal), the derived error model bounds it by the terms that the reference's forward and backward
steps round (harness.reference.intermediates.gradient_terms; docs/declaring-ops.md).
"""

import torch

from harness import from_reference, register_kernel

REDUCTIONS = ("none", "mean", "sum")


def flce_reference(x, weight, target, ignore_index, reduction):
    return torch.nn.functional.cross_entropy(x @ weight.T, target, ignore_index=ignore_index, reduction=reduction)


_gen = torch.Generator().manual_seed(0)
EXAMPLE = (torch.randn(8, 16, generator=_gen), torch.randn(32, 16, generator=_gen),
           torch.tensor([3, -100, 0, 31, 7, 12, -100, 5]), -100, "none")

op = from_reference(flce_reference, EXAMPLE, vary={"x": ("N", "D"), "weight": ("V", "D"), "target": ("N",)},
                    name="flce_rows", ignore_index="ignore_index", options={"reduction": REDUCTIONS}, doc=__doc__)


class _FLCE(torch.autograd.Function):
    """Logits, loss and dlogits in fp32 in the forward; backward applies the upstream gradient."""

    @staticmethod
    def forward(ctx, x, weight, target, ignore_index, reduction, per_row):
        xf, wf = x.float(), weight.float()
        logits = xf @ wf.T
        keep = target != ignore_index
        safe = torch.where(keep, target, 0)
        rows, hot = torch.arange(len(safe)), torch.nn.functional.one_hot(safe, logits.shape[1]).bool()
        # the loss as log(1 + sum_{j != t} exp(z_j - z_t)) and the target's dlogit as minus the other
        # classes' probabilities: neither cancels (lse - z_t and p_t - 1 do where p_t is near 1)
        zt = logits[rows, safe]
        loss = torch.where(torch.isfinite(zt), torch.logsumexp(logits - zt[:, None], -1), torch.logsumexp(logits, -1) - zt)
        loss = torch.where(keep, loss, 0.0)
        g = torch.softmax(logits, -1)
        g = torch.where(hot, -g.masked_fill(hot, 0.0).sum(-1, keepdim=True), g)
        g = torch.where(keep[:, None], g, 0.0)  # an ignored row's gradient is 0
        kept = int(keep.sum())
        if reduction == "mean":
            g = g / kept if kept else g * float("nan")
            out = loss.sum() / kept if kept else loss.sum() * float("nan")
        else:
            out = loss if reduction == "none" else loss.sum()
        ctx.save_for_backward(xf, wf, g)
        ctx.dtypes, ctx.per_row, ctx.keep = (x.dtype, weight.dtype), per_row, keep
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xf, wf, g = ctx.saved_tensors
        dy = dy.float()
        if dy.dim() == 0:
            scaled = g * dy
        elif ctx.per_row:
            scaled = g * dy[:, None]
        else:  # the upstream read as one value: its first element
            scaled = g * dy.reshape(-1)[0]
        dx = torch.where(ctx.keep[:, None], scaled @ wf, 0.0)  # an ignored row's dx is 0, whatever the weight holds
        return dx.to(ctx.dtypes[0]), (scaled.T @ xf).to(ctx.dtypes[1]), None, None, None, None


@register_kernel("flce_rows", name="flce_torch", description="fp32, each row's gradient scaled by its own upstream value")
def flce_torch(x, weight, target, ignore_index, reduction):
    return _FLCE.apply(x, weight, target, ignore_index, reduction, True)


@register_kernel("flce_rows", name="flce_first_upstream", description="every row's gradient scaled by grad_output[0]")
def flce_first_upstream(x, weight, target, ignore_index, reduction):
    return _FLCE.apply(x, weight, target, ignore_index, reduction, False)
