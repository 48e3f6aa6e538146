"""Allowed error from a backward-error estimate: how much rounding the inputs moves the reference.

A finite-precision kernel computes, at best, the exact result for inputs that differ from the
given ones by a rounding of the input dtype (backward stability), with its own arithmetic (fp32,
whatever the input dtype) adding roundings of the terms it sums or cancels, plus a rounding of
its output. So for each element the allowed error is

    SAFETY * sum over input tensors t of                                 delta = +1 or -1, a fresh
             max over COPIES of |ref(t * (1 + u * delta), others) - ref|   sign per element and copy
  + (COMPUTE_ULPS + 2 sqrt(n)) * u32 * terms                             fp32 arithmetic on the terms
  + eps_out * |ref|                                                       the output's rounding
  + the smallest normal fp32 number                                       results that small may
                                                                          flush to zero

with u the unit roundoff of the input dtype (2^-11 fp16, 2^-8 bf16, 2^-24 fp32), u32 = 2^-24,
and eps_out the output dtype's machine epsilon (the oracle and a kernel round to neighbouring
values, one ulp apart at most). ``terms`` is the size of the intermediate terms a formula sums
or cancels (an op's declaration may give it, e.g. 1 and p_t for p_t - 1 in a cross-entropy
gradient, where p_t ~ 1 rounds in fp32 but perturbing the logits barely moves the result);
without it, |ref|. n is the length of the longest sum the op computes (1 for an elementwise
op): a sum of n terms in fp32 is typically off by sqrt(n) roundings of its terms (random-walk
accumulation; measured: torch's fp32 softmax over 2638 ties is off by 33 ulps), twice that
for safety; COMPUTE_ULPS covers the few roundings of the other steps. The first term grows
with the op's conditioning: where the result is sensitive to its inputs (a row with a large
offset, large logits), the spread grows with it, and where it is not, the allowance stays at
a few ulps.

Why whole roundings with random signs, one tensor at a time: a perturbation of random size
samples an element's conditioning instead of bounding it (four uniform draws all below half a
rounding happen to one element in 16), and two inputs moved together can cancel each other's
effect (silu(a) * b where a's and b's contributions have opposite signs). Then a correct kernel
whose only error is one rounding of an input-sized intermediate (a GPU's exp(a) is
ex2.approx(fl(a * log2 e)): a relative error of |a| * 2^-24, exactly one fp32 rounding of a
moved through exp) failed at 1.0-1.39x the allowance under a random-size model (docs/guarantees.md).
Moving one tensor by a whole rounding gives each element its first-order sensitivity to that
tensor in full (exactly, for an element that depends on one element of it; a random walk over
the terms for a reduction), and the sum over tensors bounds how their roundings combine.

Max-shifted ops (softmax): a kernel subtracts each row's max first, and the max is one of the
row's values, so x - max is exact near the max and off by one rounding of itself elsewhere. For
the inputs an op declares ``shift_by_max``, the rounding is taken on x - max (``row_max_center``)
instead of x: a row of -1e9 (fp32's ulp there is 64) then gets the allowance of a row of zeros,
which every max-subtracting kernel meets, not one that accepts any distribution over the row
(exp of +-64 moves the mass anywhere), under which padding lanes read as -1e9 (y = 1/(N + pad)
on a masked row) or y = exp(x - logsumexp) (log N rounded away: y = 1) passed.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

COPIES = 2  # per input tensor
SAFETY = 2.0
COMPUTE_ULPS = 8.0

UNIT_ROUNDOFF = {
    torch.float16: 2.0**-11,
    torch.bfloat16: 2.0**-8,
    torch.float32: 2.0**-24,
    torch.float64: 2.0**-53,
}


def unit_roundoff(dtype: torch.dtype) -> float:
    try:
        return UNIT_ROUNDOFF[dtype]
    except KeyError:
        raise KeyError(f"no unit roundoff for dtype {dtype}; add it to harness/compare/rounding.py") from None


def output_rtol(dtype: torch.dtype) -> float:
    """eps of the output dtype: one ulp at most between two roundings of the same value."""
    return 2.0 * unit_roundoff(dtype)


def output_atol(dtype: torch.dtype) -> float:
    """Below fp32's normal range a kernel may flush to zero; fp16's own subnormal spacing is coarser."""
    if dtype == torch.float64:
        return torch.finfo(torch.float64).tiny
    return max(torch.finfo(torch.float32).tiny, float(torch.finfo(dtype).smallest_normal) * 2.0 * unit_roundoff(dtype))


def allowance(spread: torch.Tensor, terms: torch.Tensor, n: int = 1, compute_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The first two terms of the module docstring's bound (the rest is an atol and an rtol)."""
    ulps = COMPUTE_ULPS + 2.0 * math.sqrt(max(n, 1))
    terms = terms.detach().to(spread.device, torch.float64).abs()
    return SAFETY * spread + ulps * unit_roundoff(compute_dtype) * torch.where(torch.isfinite(terms), terms, 0.0)


def perturb(t: torch.Tensor, u: float, gen: torch.Generator, center: torch.Tensor | None = None) -> torch.Tensor:
    """``t * (1 + u * delta)``, delta = +1 or -1 per element, each with probability 1/2: every
    element moved by a whole rounding (float64, on t's device). With ``center`` (broadcast to
    t), ``center + (t - center) * (1 + u * delta)``: the rounding of the difference from it."""
    negative = torch.rand(t.shape, generator=gen, dtype=torch.float64, device=gen.device) < 0.5
    delta = 1.0 - 2.0 * negative.to(torch.float64)  # float64: 1 + 2^-24 rounds to 1 in fp32
    factor = 1.0 + u * delta.to(t.device)
    if center is None:
        return t * factor
    return center + (t - center) * factor


def row_max_center(t: torch.Tensor) -> torch.Tensor:
    """Each row's (last dimension's) largest finite value, 0 for a row without one: the value a
    kernel subtracts first in a max-shifted op (softmax), keepdim for broadcasting."""
    finite = torch.where(torch.isfinite(t), t, torch.full_like(t, float("-inf")))
    m = finite.amax(-1, keepdim=True) if t.numel() else torch.zeros_like(t[..., :1])
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


def spread(
    evaluate: Callable[[Sequence[torch.Tensor]], Sequence[torch.Tensor]],
    tensors: Sequence[torch.Tensor],
    u: float,
    base: Sequence[torch.Tensor],
    *,
    copies: int = COPIES,
    seed: int = 0,
    centers: Sequence[torch.Tensor | None] | None = None,
) -> list[torch.Tensor]:
    """Per output, elementwise: the sum over ``tensors`` of the max over ``copies`` of
    |evaluate(that tensor perturbed, the others as given) - base|.

    ``tensors`` are the float64 values to perturb (inputs and upstream gradient alike); the
    generator is seeded so that the same inputs always get the same allowance. Non-finite
    differences count as 0: where ``base`` is not finite the comparison demands the same
    non-finite value, and a perturbation that overflows float64 says nothing a kernel may
    use (an infinite allowance would let anything pass there). ``centers`` (one per tensor,
    None for a plain rounding) moves a tensor by a rounding of its difference from the center
    (``perturb``).
    """
    gen = torch.Generator(device="cpu").manual_seed(seed)
    total = [torch.zeros_like(b, dtype=torch.float64) for b in base]
    for i, t in enumerate(tensors):
        worst = [torch.zeros_like(b, dtype=torch.float64) for b in base]
        center = centers[i] if centers is not None else None
        for _ in range(copies):
            outs = evaluate([perturb(s, u, gen, center) if j == i else s for j, s in enumerate(tensors)])
            for k, (out, b) in enumerate(zip(outs, base)):
                d = (out.detach().to(torch.float64) - b.detach().to(torch.float64)).abs()
                d = torch.where(torch.isfinite(d), d, 0.0)
                worst[k] = torch.maximum(worst[k], d)
        total = [acc + w for acc, w in zip(total, worst)]
    return total


SHIFT_TOLERANCE = 1e-8  # relative change of a float64 output under a row shift still read as invariance


def shift_residues(evaluate: Callable[[Sequence[torch.Tensor]], Sequence[torch.Tensor]], tensors: Sequence[torch.Tensor],
                   base: Sequence[torch.Tensor], n_out: int, grad_of: dict[int, int]) -> dict[int, torch.Tensor]:
    """Terms that a shift-invariant formula adds to a gradient, per gradient (its index in ``base``).

    Where every output is invariant to adding a constant to each row (last dim) of an input (the
    max of a softmax, the lse of a log-softmax or a cross-entropy, the mean of a layer norm), a
    kernel may form that shift and differentiate through it (autograd through ``x.amax()``, a
    subtracted mean): the gradient that reaches the shift is exactly zero, but it is computed as a
    sum of the row's gradient terms, so its rounding residue, a few roundings of sum |dx| over the
    row, lands on the row's max (where amax routes it) or on every element (a mean's 1/N). Found
    by trying the float64 reference on the shifted input (``grad_of``: tensor index -> the index
    of its gradient in ``base``); each such gradient gets sum |dx| at its rows' max and sum |dx| / N
    everywhere as terms."""
    out = {}
    for i, k in grad_of.items():
        t = tensors[i]
        if t.dim() == 0 or t.shape[-1] < 2:
            continue
        finite = torch.isfinite(t)
        scale = torch.where(finite, t.abs(), torch.zeros_like(t)).amax(-1, keepdim=True)
        moved = evaluate([s + (0.375 * scale + 0.5) if j == i else s for j, s in enumerate(tensors)])
        if not all(_unchanged(m, b) for m, b in zip(moved[:n_out], base[:n_out])):
            continue
        g = base[k].detach().to(torch.float64).abs()
        g = torch.where(torch.isfinite(g), g, torch.zeros_like(g))
        row = g.sum(-1, keepdim=True)
        at_max = finite & (t == row_max_center(t))
        out[k] = torch.where(at_max, row, torch.zeros_like(g)) + row / t.shape[-1]
    return out


def _unchanged(moved: torch.Tensor, base: torch.Tensor) -> bool:
    """The same non-finite pattern, and finite values within SHIFT_TOLERANCE of the output's size."""
    a, b = moved.detach().to(torch.float64), base.detach().to(torch.float64)
    if not torch.equal(torch.isfinite(a), torch.isfinite(b)):
        return False
    both = torch.isfinite(b)
    if not bool(both.any()):
        return False
    size = b[both].abs().max()
    return bool(((a[both] - b[both]).abs() <= SHIFT_TOLERANCE * (b[both].abs() + size)).all())


def absorbed_shift(x: torch.Tensor, index: Sequence[int] | None) -> str | None:
    """Why a max-shifted row fails beyond rounding, where the reason is this one: in the row of
    ``x`` holding ``index`` (an element of an output shaped like x), the inputs are so large that
    fp32's spacing there exceeds twice log N, so a row statistic formed as max + log(sum exp(x - max))
    (a logsumexp) rounds back to the max, and exp(x - lse) then sums to up to N instead of 1 (a
    row masked with -1e9 or the dtype's lowest value). Subtracting the max itself is exact there
    (``row_max_center``), which is why the error model allows no more. None where the row does not
    show it."""
    if index is None or x.dim() == 0 or len(index) != x.dim() or x.shape[-1] < 2:
        return None
    row = x.detach()[tuple(index[:-1])].to(torch.float64)
    finite = row[torch.isfinite(row)]
    if finite.numel() == 0:
        return None
    m = abs(float(finite.max()))  # the row max, which the statistic is formed around
    if m == 0.0:
        return None
    spacing = 2.0 ** (math.floor(math.log2(m)) - 23)  # fp32's, the arithmetic the error model assumes
    log_n = math.log(row.numel())
    if spacing / 2.0 <= log_n:
        return None
    return (f"why: the worst element's row has its max at magnitude {m:.3g}, where fp32's spacing is {spacing:g}; "
            f"log N = {log_n:.3g} is under half of it, so a logsumexp formed as max + log(sum exp(x - max)) rounds "
            f"back to the max and exp(x - lse) sums to up to N = {row.numel()}, not 1 (subtracting the max itself "
            "is exact there, all the error model allows)")
