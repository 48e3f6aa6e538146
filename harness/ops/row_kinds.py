"""Value kinds for row-wise and elementwise ops: what a declared op's float inputs look like.

A kind fills a tensor of any shape; "rows" are its last dimension (the reduction of a row-wise
op). Values are drawn in float64 from the case's generator and cast to the case's dtype by the
caller, so every backend sees the same inputs. Each kind targets a bug class:

- normal:         N(0, 1).
- zero_rows:      some rows all zeros (division by a zero norm, 0 * inf).
- tiny:           N(0, 1) * 1e-4 (squares underflow in fp16).
- huge:           N(0, 1) * 300 (fp16) or 1e4 (squares overflow without an upcast).
- mixed_scale:    rows scaled 1e-3 .. 1e3 (a per-tensor instead of per-row scale).
- nonfinite:      one NaN or +inf (it must reach exactly the outputs it reaches in float64).
- offset_rows:    1e4 + N(0, 1), the spread widened to two ulps of 1e4 in the dtype where
                  that is more (fp16: N(0, 20), bf16: N(0, 160)), so rounding to the dtype
                  leaves a spread: E[x^2] - E[x]^2 cancels catastrophically there.
- constant_rows:  every element of a row equal (variance exactly 0: only eps keeps 1/sqrt finite).
- large_logits:   100 + 10 * N(0, 1): exp overflows fp16 and fp32 without the max subtraction.
- masked_rows:    about half of each row at a large negative value (masked attention scores),
                  one row entirely masked (uniform softmax; exp underflows to 0 without the max
                  subtraction: 0 / 0). The value is -1e9 where the dtype holds it, else
                  -3e4 (fp16's safe range: its largest finite value is 65504).
- ties:           small integers, so the row max repeats.
- peaked:         N(0, 1) with one logit 120 higher per row (a confident prediction), at the
                  row's last column, its first, or elsewhere in turn: a max taken over part of
                  the row (a loop that stops a block early) misses it, and exp(120 - max)
                  overflows fp32.
- neg_inf:        N(0, 1) * 3 with entries of -inf (masked positions, as a causal or vocabulary
                  mask writes them): each row starts with a run of -inf of random length (n - 1
                  on the first row: one finite value, a one-hot softmax), which spans whole column
                  blocks on long rows, plus about one in eight of the rest; every row keeps a
                  finite value. exp(-inf - m) = 0 is exact; an online max/sum whose correction
                  exp(m_old - m_new) meets -inf - (-inf) = NaN (a block or a lane that has seen
                  only -inf) turns the row into NaN. A label never sits on a -inf logit
                  (harness.ops.derive: a masked class is never the target).
- gate_extremes:  N(0, 1) * 20: sigmoid saturates both ways (exp(-x) overflows fp16 for x < -11).

Probability rows (an input that is a distribution, each row summing to 1: its own value kinds,
``Tensor(kinds=PROBABILITIES)``); two inputs drawn so meet exact ties, p == q, at their zeros:
- probs:          softmax of 2 N(0, 1): every entry positive.
- sparse_probs:   about half of each row exactly 0 (at least one entry kept), the rest the
                  softmax of N(0, 1): where two such inputs are both 0, |p - q| has its kink,
                  and a gradient taking sign(0) as +-1 there is wrong.
- one_hot:        one entry 1 per row (a hard label), the rest 0.
"""

from __future__ import annotations

import math

import torch

from harness.ops import values

NORMALISATION = ("offset_rows", "constant_rows")
LOGITS = ("large_logits", "masked_rows", "ties", "peaked", "neg_inf")
GATES = ("gate_extremes",)
PROBABILITIES = ("probs", "sparse_probs", "one_hot")
KINDS = values.ROW_KINDS + NORMALISATION + LOGITS + GATES + PROBABILITIES

OFFSET = 1e4
MASKED = {torch.float16: -3e4}
MASKED_DEFAULT = -1e9
PEAK = 120.0


def draw(kind: str, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """A float64 tensor of ``shape`` whose rows follow ``kind`` (see the module docstring)."""
    if kind not in KINDS:
        raise ValueError(f"unknown value kind {kind!r}; choose from {KINDS}")
    n = shape[-1] if shape else 1
    m = math.prod(shape[:-1]) if len(shape) > 1 else 1
    if kind in values.ROW_KINDS:
        return values.rows(kind, m, n, dtype, gen).reshape(shape)
    x = torch.randn((m, n), generator=gen, dtype=torch.float64)
    if kind == "offset_rows":
        x = OFFSET + x * max(1.0, 2.0 * OFFSET * torch.finfo(dtype).eps)
    elif kind == "constant_rows":
        x = x[:, :1].expand(m, n) * 3.0
    elif kind == "large_logits":
        x = 100.0 + 10.0 * x
    elif kind == "masked_rows":
        masked = torch.rand((m, n), generator=gen) < 0.5
        masked[int(torch.randint(m, (1,), generator=gen))] = True
        x = torch.where(masked, torch.full_like(x, MASKED.get(dtype, MASKED_DEFAULT)), x)
    elif kind == "peaked":
        rows = torch.arange(m)
        where = torch.where(rows % 3 == 0, n - 1, torch.where(rows % 3 == 1, 0, torch.randint(n, (m,), generator=gen)))
        x[rows, where] += PEAK
    elif kind == "ties":
        x = torch.randint(-2, 3, (m, n), generator=gen).to(torch.float64)
    elif kind == "neg_inf":
        lead = torch.randint(n, (m,), generator=gen)
        lead[0] = n - 1
        cols = torch.arange(n).unsqueeze(0)
        masked = (cols < lead.unsqueeze(1)) | (torch.rand((m, n), generator=gen) < 0.125)
        masked[torch.arange(m), lead] = False
        x = torch.where(masked, torch.full_like(x, float("-inf")), 3.0 * x)
    elif kind == "gate_extremes":
        x = 20.0 * x
    elif kind == "probs":
        x = torch.softmax(2.0 * x, -1)
    elif kind == "sparse_probs":
        zero = torch.rand((m, n), generator=gen) < 0.5
        zero[torch.arange(m), torch.randint(n, (m,), generator=gen)] = False
        x = torch.softmax(torch.where(zero, torch.full_like(x, float("-inf")), x), -1)
    elif kind == "one_hot":
        x = torch.zeros_like(x)
        x[torch.arange(m), torch.randint(n, (m,), generator=gen)] = 1.0
    return x.contiguous().reshape(shape)
