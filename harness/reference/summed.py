"""How many terms an output element of a torch reference sums: the length its rounding grows with.

A declared op names the dims it reduces; a reference given as a torch function or a KernelBench
Model names none, and the largest dim undercounts a convolution (channels x kernel window), a
norm over several dims (every element) or a reduction over a dim other than the largest. The
count is read from the reference itself: the number of input elements a sampled output element
depends on (the nonzero entries of its gradient, float64, at seeded normal values of the inputs'
shapes), the largest over the float inputs
(a product of two inputs sums K terms, not 2K) and over ``SAMPLES`` output elements (the first,
the last, the middle and seeded random ones: a cumulative sum's last element sums the row).
"""

from __future__ import annotations

import torch

SAMPLES = 8
SEED = 4321


def summed_length(reference, args) -> int:
    """The most input elements (of any one float input) that a sampled output element depends on;
    1 where the reference cannot be differentiated."""
    gen = torch.Generator().manual_seed(SEED)
    # seeded normal values of each float input's shape: the count is a function of the shapes, not of
    # a case's values (a row of zeros has a zero gradient through x * x, and sums as many terms)
    leaves = [torch.randn(a.shape, generator=gen, dtype=torch.float64).to(a.device).requires_grad_(True)
              if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    floats = [a for a in leaves if isinstance(a, torch.Tensor) and a.requires_grad]
    if not floats:
        return 1
    try:
        with torch.enable_grad():
            out = reference(*leaves)
            out = out[0] if isinstance(out, (tuple, list)) else out
            if not (isinstance(out, torch.Tensor) and out.is_floating_point() and out.requires_grad and out.numel()):
                return 1
            flat = out.reshape(-1)
            n = flat.numel()
            picks = {0, n - 1, n // 2, *torch.randint(0, n, (SAMPLES,), generator=gen).tolist()}
            best = 1
            for i in sorted(picks):
                grads = torch.autograd.grad(flat[i], floats, retain_graph=True, allow_unused=True)
                for g in grads:
                    if g is not None:
                        best = max(best, int(torch.count_nonzero(g)))
            return best
    except Exception:  # noqa: BLE001 - a bound only: the declared reduces stand in
        return 1
