"""The op ``cross_entropy_ext``: cross-entropy with the options language-model losses use, declared
from a plugin file, with a torch kernel and (when liger-kernel is installed) Liger-Kernel's.

    python -m harness verify --plugin examples/plugins/cross_entropy_ext.py --op cross_entropy_ext

``f(logits[N, V], target[N] int64, weight[V], ignore_index: int, label_smoothing: float,
lse_square_scale: float, softcap: float, weighted: int) -> scalar`` in logits' dtype,
differentiable in logits:

    x    = softcap * tanh(logits / softcap)            (softcap = 0: x = logits)
    w    = weight if weighted else None                (weighted = 0: no class weights at all)
    loss = F.cross_entropy(x, target, weight=w, ignore_index=ignore_index,
                           label_smoothing=label_smoothing)
           + lse_square_scale * mean over the rows not ignored of logsumexp(x_i)^2   (the z-loss)

NaN when every row is ignored (as torch). The class weights are drawn around 1 with random sizes
(never all ones), so a kernel that drops a weight, or divides by the row count where the weights'
sum belongs, is seen. ``weighted = 0`` passes no weight: a kernel may take another path then
(Liger's ``HAS_WEIGHT = False`` branches carry their own smoothing, z-loss and target-gradient
code, which weighted cases never run; run 45 left 9 mutants there). The ``cross_entropy`` op has none of these options: this op is what reaches
the branches of a kernel that implements them (Liger's ``HAS_WEIGHT``, label smoothing, z-loss and
softcapping code, which a campaign through ``cross_entropy`` cannot judge).

Error model (harness.compare.rounding): twice the spread of the float64 loss and gradient when the
logits, the weights and the upstream gradient are rounded within the input dtype, plus eight fp32
roundings of the terms (oracles.cross_entropy's magnitudes on the softcapped logits, times the
largest weight, plus the terms of the smoothing sum in its expanded form and of the z-loss; see
``terms``), plus the output's rounding.
"""

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from harness import Contract, Index, OpDecl, Scalar, Tensor, register_kernel, register_op
from oracles.cross_entropy import cross_entropy_magnitudes


def _capped(x, softcap):
    return softcap * torch.tanh(x / softcap) if softcap else x


def _z_term(x, target, ignore_index):
    """mean over the rows not ignored of logsumexp(x_i)^2 (ignored rows contribute nothing, even NaN).
    logsumexp as m + log(sum(exp(x - m))) with m held constant: its gradient is then the softmax of
    exact differences. torch.logsumexp's backward, exp(x - lse), loses the log(V) that an fp32 lse
    of -1e9 cannot hold on a masked row, and returns V times the gradient (the harness fails it)."""
    valid = target != ignore_index
    m = x.detach().amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    lse = (x - m).exp().sum(dim=-1).log() + m.squeeze(-1)
    return torch.where(valid, lse.square(), torch.zeros_like(lse)).sum() / valid.sum()


def reference(logits, target, weight, ignore_index, label_smoothing, lse_square_scale, softcap, weighted):
    x = _capped(logits, softcap)
    loss = F.cross_entropy(x, target, weight=weight if weighted else None, ignore_index=ignore_index, label_smoothing=label_smoothing)
    return loss + lse_square_scale * _z_term(x, target, ignore_index) if lse_square_scale else loss


def terms(logits, target, weight, ignore_index, label_smoothing, lse_square_scale, softcap, weighted, dy):
    """Sizes of the terms the loss and the gradient sum or cancel. The smoothing part,
    eps * sum_c w_c (lse - x_c) with eps = label_smoothing / V, is commonly evaluated expanded,
    eps * lse * sum(w) - eps * sum(w_c x_c) (Liger's form): its terms are eps * w_c (|lse| + |x_c|),
    which cancel to 0 on a one-class row. Its gradient eps * (p_c sum(w) - w_c) cancels where
    p_c ~ w_c / sum(w): terms eps * (|w_c| + p_c sum|w|)."""
    x = _capped(logits.to(torch.float64), softcap)
    loss_t, grad_t = cross_entropy_magnitudes(x, target, dy, ignore_index)
    wf = weight.to(torch.float64).abs() if weighted else torch.ones(x.shape[1], dtype=torch.float64, device=x.device)
    w = wf.max()
    valid = target != ignore_index
    n = max(int(valid.sum()), 1)
    # torch's mean divides by the valid rows' target weights, not by their count
    scale = n / max(float(wf[target.clamp(min=0)][valid].sum()), 1e-30) if bool(valid.any()) else 1.0
    eps = label_smoothing / x.shape[1]
    lse = torch.logsumexp(x, dim=-1).abs()
    smooth = eps * (((lse.unsqueeze(1) + x.abs()) * wf).sum(1) * valid).sum() / n
    p = torch.softmax(x, dim=1)
    grad_smooth = abs(float(dy)) / n * eps * (wf + p * wf.sum()) * valid.unsqueeze(1)
    z = lse_square_scale * (torch.where(valid, lse.square(), torch.zeros_like(lse))).sum() / n
    grad_z = 2 * lse_square_scale * abs(float(dy)) / n * lse.unsqueeze(1) * p
    return scale * (w * loss_t + smooth) + z, scale * (w * grad_t + grad_smooth) + grad_z


register_op(OpDecl(
    name="cross_entropy_ext",
    signature="f(logits[N, V], target[N] int64, weight[V], ignore_index: int, label_smoothing: float, "
              "lse_square_scale: float, softcap: float, weighted: int) -> scalar",
    inputs=(Tensor("logits", "N, V"), Index("target", "N", high="V", ignore="ignore_index"),
            Tensor("weight", "V", values="gain", differentiable=False),
            # the floor takes every scalar's values in turn, all with the same counter: lengths
            # 3, 2, 5, 7 and 11, pairwise coprime, so every pair of values occurs together
            Scalar("ignore_index", (-100, -1, 0)), Scalar("label_smoothing", (0.0, 0.2)),
            Scalar("lse_square_scale", (0.0, 1e-3, 0.0, 1e-3, 0.0)),
            Scalar("softcap", (0.0, 0.0, 20.0, 0.0, 0.0, 20.0, 0.0)),
            Scalar("weighted", (1, 0, 1, 0, 1, 1, 0, 1, 0, 1, 0))),
    output="",
    reference=reference,
    terms=terms,
    reduces=("N", "V"),
    value_kinds=("normal", "tiny", "mixed_scale", "large_logits", "masked_rows", "ties"),
    forward_check="loss",
    doc=__doc__,
))


@register_kernel("cross_entropy_ext", name="torch_cross_entropy_ext",
                 description="torch's F.cross_entropy in fp32 on upcast inputs, plus the z-loss, rounded back")
def torch_cross_entropy_ext(logits, target, weight, ignore_index, label_smoothing, lse_square_scale, softcap, weighted):
    x = _capped(logits.float(), softcap)
    loss = F.cross_entropy(x, target, weight=weight.float() if weighted else None, ignore_index=ignore_index, label_smoothing=label_smoothing)
    if lse_square_scale:
        loss = loss + lse_square_scale * _z_term(x, target, ignore_index)
    return loss.to(logits.dtype)


try:
    from liger_kernel.ops.cross_entropy import LigerCrossEntropyFunction
except ImportError:  # not installed: only the torch kernel
    LigerCrossEntropyFunction = None

if LigerCrossEntropyFunction is not None:
    sys.path.insert(0, str(Path(__file__).parent))
    from _carrier import narrowed  # noqa: E402

    def liger_cross_entropy_ext(logits, target, weight, ignore_index, label_smoothing, lse_square_scale, softcap,
                                weighted):
        # Liger 0.8.5: forward(ctx, _input, target, weight, ignore_index, lse_square_scale,
        # label_smoothing, reduction, softcap, ...) -> (loss, z_loss, token_accuracy, predicted_tokens)
        out = LigerCrossEntropyFunction.apply(logits, target, weight if weighted else None, ignore_index, lse_square_scale,
                                              label_smoothing, "mean", softcap or None)
        return out[0] if isinstance(out, tuple) else out

    _waive = {"all_ignored": "returns 0 by design when every row is ignored (torch: NaN)"}
    register_kernel("cross_entropy_ext", name="liger_cross_entropy_ext",
                    contract=Contract(dtypes=(torch.float32, torch.float16, torch.bfloat16), waive=_waive),
                    description="Liger-Kernel's LigerCrossEntropyFunction with weights, smoothing, z-loss, softcap (third party)",
                    )(liger_cross_entropy_ext)
    # the carrier of `mutate --mutate-module liger_kernel.ops.cross_entropy --carrier liger_cross_entropy_ext_contiguous`:
    # contiguous fp32, its in-place gradient declared. Not bf16: Liger rounds the gradient into the
    # bf16 logits in its forward and rounds it again when its backward scales it by grad_output,
    # up to 1.93 x the one-rounding allowance on this op's bf16 cases (run 44; the fp16 finding's
    # cause, docs/findings.md)
    register_kernel("cross_entropy_ext", name="liger_cross_entropy_ext_contiguous",
                    contract=Contract(dtypes=(torch.float32,), contiguous=True, waive=dict(
                        _waive, inputs_unchanged="the forward stores the gradient into the logits' storage (Liger's memory saving)")),
                    description="Liger-Kernel's LigerCrossEntropyFunction, all options, contiguous fp32 (library-mutation carrier)",
                    )(narrowed(liger_cross_entropy_ext, dtypes=(torch.float32,), contiguous=True))
