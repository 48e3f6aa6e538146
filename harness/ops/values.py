"""Value distributions that expose bugs, drawn in float64 from a seeded CPU generator.

Drawing on the CPU in float64 and casting afterwards makes a case's inputs identical on every
backend and device. Gains and upstream gradients are never all ones.
"""

from __future__ import annotations

import math

import torch

ROW_KINDS = ("normal", "zero_rows", "tiny", "huge", "mixed_scale", "nonfinite")

# Scale of "huge" rows: for fp16, squares of about 300**2 = 9e4 overflow fp16's 65504 unless
# the kernel upcasts before squaring; fp32/bf16 share fp32's range, so 1e4 keeps the outputs
# and gradients of normal size while still stressing the accumulation.
HUGE = {torch.float16: 300.0}
HUGE_DEFAULT = 1e4


def generator(seed: int) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(int(seed))


def rows(kind: str, m: int, n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """An [m, n] float64 tensor of the given kind (values chosen to be exact after the cast)."""
    if kind not in ROW_KINDS:
        raise ValueError(f"unknown value kind {kind!r}; choose from {ROW_KINDS}")
    x = torch.randn((m, n), generator=gen, dtype=torch.float64)
    if kind == "zero_rows":
        zero = torch.rand(m, generator=gen) < 0.3
        zero[torch.randint(m, (1,), generator=gen)] = True
        x[zero] = 0.0
    elif kind == "tiny":
        x *= 1e-4
    elif kind == "huge":
        x *= HUGE.get(dtype, HUGE_DEFAULT)
    elif kind == "mixed_scale":
        x *= torch.logspace(-3, 3, m, dtype=torch.float64)[torch.randperm(m, generator=gen)].unsqueeze(1)
    elif kind == "nonfinite":
        i = int(torch.randint(m, (1,), generator=gen))
        j = int(torch.randint(n, (1,), generator=gen))
        x[i, j] = float("nan") if (i + j) % 2 else float("inf")
    return x


def gains(n: int, gen: torch.Generator) -> torch.Tensor:
    """A weight vector around 1 with random signs and sizes: never all ones."""
    return torch.randn(n, generator=gen, dtype=torch.float64) * 0.5 + 1.0


def additive_mask(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """An additive attention-style mask: 0 where kept, -inf or finfo(dtype).min (the value
    Hugging Face models fill with) where masked; row 0 a causal prefix, the others random, each
    row with at least one kept entry, so the masked softmax of every row is defined."""
    n = shape[-1]
    m = math.prod(shape[:-1]) if len(shape) > 1 else 1
    masked = torch.rand((m, n), generator=gen) < 0.4
    masked[0] = torch.arange(n) > 0
    keep = torch.randint(n, (m,), generator=gen)
    keep[0] = 0
    masked[torch.arange(m), keep] = False
    fill = torch.where(torch.rand((m, n), generator=gen) < 0.5, float("-inf"), torch.finfo(dtype).min)
    return torch.where(masked, fill.to(torch.float64), torch.zeros((m, n), dtype=torch.float64)).reshape(shape)


MASK_DENSITIES = (0.5, 0.1, 0.9, 0.0, 1.0)


def bool_mask(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """A bool mask, true with a density drawn from MASK_DENSITIES (all false and all true among
    them: a kernel that ignores the mask or inverts it differs from the reference on most)."""
    p = MASK_DENSITIES[int(torch.randint(len(MASK_DENSITIES), (), generator=gen))]
    return torch.rand(shape, generator=gen, dtype=torch.float64) < p


def upstream(shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """A non-uniform upstream gradient."""
    return torch.randn(shape, generator=gen, dtype=torch.float64)
