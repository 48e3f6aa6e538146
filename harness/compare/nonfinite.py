"""The non-finite policy: what a kernel may answer where the float64 oracle is not finite.

The oracle is torch's own formula in float64. Where an input holds +-inf, that formula can break
down (inf - inf, 0 * inf) and give NaN where the mathematics has a limit: a softmax row holding
one +inf is one-hot (0 at its finite entries, 1 at the inf), a cross-entropy whose non-target
logit is +inf has an infinite loss. A kernel that returns that limit is right, and so is one that
returns NaN there as torch does. The policy, applied by every value comparison
(harness.compare.allclose.compare, through ``limit``):

- where the oracle is finite: the kernel must be finite and within the allowance (a NaN or inf
  there fails, whatever the inputs held);
- where the oracle is +-inf: the kernel must give the same inf (or, where the allowance reaches
  past the dtype's largest value, a finite value of that sign; see allclose);
- where the oracle is NaN because an input is +-inf (the oracle at the inputs with every +-inf
  replaced by +-``LIMIT`` is not NaN there): NaN is accepted (torch's own answer), and so is the
  limit, compared as any expected value (an inf where the limit overflows the output dtype);
  anything else fails;
- where the oracle is NaN for any other reason (a NaN input, 0/0 over finite inputs: a
  cross-entropy whose rows are all ignored): NaN, exactly as before;
- for an op declared from a torch reference (harness.ops.reference), where the oracle is +-inf
  and the reference itself, run in the case's dtype on the same inputs, gives NaN (torch's fp32
  gelu(+inf) is NaN, its float64 one +inf): NaN is accepted besides the inf (``own_nans``), the
  reference's own convention in that dtype. A NaN where that run gives an inf or a finite value
  still fails, and so does every NaN of a declared op, whose reference is a float64 formula only.

So only outputs that already depend on an infinite input get a second acceptable answer; rows
(or outputs) whose inputs are all finite are judged as strictly as ever, and -inf entries, whose
float64 oracle is finite (exp(-inf) = 0), keep demanding the finite answer.

``LIMIT`` is 1e100: its square (1e200) and the cube of its reciprocal (1e-300) stay inside
float64's normal range, so the float64 oracle evaluates the limit of a norm or a softmax without
overflowing itself, and anything of its size overflows every output dtype (fp32 ends at 3.4e38).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

LIMIT = 1e100


def at_limit(args: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """``args`` in float64 with every +-inf replaced by +-LIMIT; None where no float tensor
    argument holds an inf (the oracle is then its own limit)."""
    if not any(isinstance(a, torch.Tensor) and a.is_floating_point() and bool(torch.isinf(a).any()) for a in args):
        return None
    out = []
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            a = a.detach().to(torch.float64)
            a = torch.where(torch.isinf(a), torch.sign(a) * LIMIT, a)
        out.append(a)
    return tuple(out)


VALUE_SUFFIXES = ("_magnitude", "_terms", "_nan_ok", "_limit")


def add_limits(expected: dict[str, torch.Tensor], inputs, oracle: Callable[[Any], dict]) -> dict[str, torch.Tensor]:
    """``expected`` (the oracle on ``inputs``) with ``<check>_limit`` added for each value where
    the oracle is NaN but its limit is not; the allowance there (``<check>_magnitude``) is the
    limit's. An oracle that cannot evaluate the limit leaves ``expected`` as it is: strict."""
    args = at_limit(tuple(inputs.args))
    if args is None:
        return expected
    try:
        limits = oracle(dataclasses.replace(inputs, args=args))
    except Exception:  # noqa: BLE001  (no limit: NaN stays the only accepted answer)
        return expected
    for name, value in list(expected.items()):
        limit = limits.get(name)
        if name.endswith(VALUE_SUFFIXES) or not isinstance(value, torch.Tensor) or not isinstance(limit, torch.Tensor):
            continue
        if limit.shape != value.shape:
            continue
        limit = limit.to(value.device)
        defined = torch.isnan(value) & ~torch.isnan(limit)
        if not bool(defined.any()):
            continue
        expected[f"{name}_limit"] = torch.where(defined, limit, torch.full_like(limit, float("nan")))
        magnitude, limit_magnitude = expected.get(f"{name}_magnitude"), limits.get(f"{name}_magnitude")
        if isinstance(magnitude, torch.Tensor) and isinstance(limit_magnitude, torch.Tensor) \
                and limit_magnitude.shape == magnitude.shape:
            expected[f"{name}_magnitude"] = torch.where(defined, limit_magnitude.to(magnitude.device), magnitude)
    return expected


def own_nans(expected: dict[str, torch.Tensor], names, own, reached=None) -> dict[str, torch.Tensor]:
    """``expected`` with ``<name>_nan_ok`` set where the oracle of output ``name`` is +-inf, or
    where ``reached`` (one bool tensor or None per name) says an infinite input reaches the
    element, and ``own`` (the reference's outputs run in the case's dtype on the same inputs, one
    per name; None where it could not run) is NaN: the reference's own non-finite convention in
    that dtype (a convolution over an inf that fp32 computes as NaN and float64 as -inf, a ReLU
    after it turning -inf into 0). Elsewhere an existing ``_nan_ok`` stands and nothing new is
    accepted."""
    reached = list(reached or ())
    for j, (name, value) in enumerate(zip(names, own)):
        oracle = expected.get(name)
        if not (isinstance(value, torch.Tensor) and isinstance(oracle, torch.Tensor)) or value.shape != oracle.shape:
            continue
        where = torch.isinf(oracle)
        if j < len(reached) and isinstance(reached[j], torch.Tensor) and reached[j].shape == oracle.shape:
            where = where | reached[j].to(oracle.device, torch.bool)
        ok = where & torch.isnan(value.detach().to(oracle.device))
        if not bool(ok.any()):
            continue
        previous = expected.get(f"{name}_nan_ok")
        if isinstance(previous, torch.Tensor):
            ok = ok | previous.to(ok.device, torch.bool).expand_as(ok)
        expected[f"{name}_nan_ok"] = ok
    return expected
