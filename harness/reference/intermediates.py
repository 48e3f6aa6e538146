"""The terms a torch reference cancels: how much rounding each of its intermediate results moves it.

A result that is a small difference of large terms (a log-softmax near 0: log of a sum of exps
that is 1 + 2.5e-8; a triplet margin d(a, p) - d(a, n) + margin; an attention row's softmax
of large scores) is computed in fp32 with an error of a few roundings of those terms, not of
the result, and rounding the inputs (harness.compare.rounding.spread) does not show it: the
intermediates are rounded, not the inputs. So the reference is run in float64 with the output
of each arithmetic step moved by one rounding of the compute dtype (a relative u, a random sign
per element; of the step's terms where it sums, a convolution or a matmul run on its inputs'
absolute values, so a sum that cancels reaches the steps after it with its terms' rounding, not
its result's: a convolution's small output through a GELU or a sigmoid), one step at a time, through torch's own decompositions (log_softmax is amax,
sub, exp, sum, log, sub; SDPA a matmul, a softmax and a matmul), and per output element

    terms = sum over steps of sqrt(sum over groups g of (max over copies of |ref(step's g rounded) - ref|)^2) / u

the size of the terms whose roundings reach that element, summed over steps as the input
spread sums over tensors (two steps moved together can cancel). Within a step, the elements an
output element depends on are moved in separate runs where few are (``groups``): a softmax over the
channels depends on each channel's logit with slopes of opposite signs (+p_i(1 - p_i) for its own,
-p_i p_j for another's), so one random sign per element moves two competing logits alike in half the
copies and their roundings cancel in the sample, where fp32's own roundings of them do not. Each
group's response is a random-sign sample as above, and the groups combine as a random walk does
(the root of the sum of squares): a single element per output element in each group gives its own
slope times its rounding, whatever the signs, and no two of them cancel. For a well-conditioned formula
it is a few times |ref|; where the formula cancels, it is the terms. Steps that round nothing
(a view, a copy, a max, a clamp, a selection) are not moved; the last step's rounding is the
output's own, which the error model adds anyway.

Steps are found by a dispatch mode (torch.utils._python_dispatch), which sees each aten
operator the reference runs; an operator with a decomposition is decomposed first, so the
rounding lands on the parts a kernel computes (a normalisation's mean and scale too, though torch
declares them one primitive: ``_with_statistics``). Beyond MAX_STEPS steps (a deep model), steps
are moved in groups (step k in group k mod MAX_STEPS), a random-sign sample within each group.

A gradient's terms (``gradient_terms``) are read the same way from the forward and autograd's
backward run under the mode together: the steps of both are moved one at a time, and the gradients
pulled back by the case's upstream gradient are compared.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

COPIES = 2
MAX_STEPS = 24
SEED = 2024
MAX_GROUPS = 16  # runs per step where an output element depends on few of its elements (one group each)
PARTIAL_GROUPS = 8  # groups per step where it depends on more: COPIES random-sign runs each
PROBES = 3  # elements made NaN (the centre, then seeded random ones) before a step's footprint is taken as unknown

# operators that round nothing: their result is one of their inputs' values, a view or a constant
EXACT = frozenset({
    "alias", "as_strided", "broadcast_in_dim", "clone", "collapse_view", "contiguous", "detach", "diagonal",
    "expand", "flatten", "movedim", "narrow", "permute", "reshape", "select", "slice", "split", "split_dim",
    "split_with_sizes", "squeeze", "t", "transpose", "unbind", "unflatten", "unfold", "unsqueeze", "view",
    "view_of", "_unsafe_view", "_reshape_alias",
    "cat", "stack", "constant_pad_nd", "pad", "repeat", "tile", "flip", "roll", "index", "index_select",
    "gather", "take", "masked_fill", "where", "scatter", "select_scatter", "slice_scatter",
    "amax", "amin", "max", "min", "maximum", "minimum", "fmax", "fmin", "abs", "neg", "relu", "clamp",
    "clamp_min", "clamp_max", "hardtanh", "threshold", "sign", "sgn", "sort", "topk", "cummax", "cummin",
    "floor", "ceil", "trunc", "round", "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "full", "full_like", "zeros", "zeros_like", "ones", "ones_like", "empty", "empty_like", "empty_strided",
    "empty_permuted", "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "fill",
    "scalar_tensor", "iota", "arange", "to", "_to_copy", "convert_element_type", "copy", "lift_fresh",
    "lift_fresh_copy", "device_put",
})


def _name(func) -> str:
    return func.overloadpacket.__name__


class _Rounding(TorchDispatchMode):
    """Runs the reference's operators, decomposed where torch has a decomposition, and moves the
    float64 output of the arithmetic steps in ``moved`` (their order of execution, modulo
    MAX_STEPS) by a rounding of relative size ``u``; counts the steps."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # nothing here is compiled: skipping it would import torch._dynamo (seconds)

    def __init__(self, u: float, moved: int | None, gen: torch.Generator | None, group=None) -> None:
        super().__init__()
        self.u, self.moved, self.gen, self.steps = u, moved, gen, 0
        # which elements of the moved step move: None (all), ("at", index) (one, made NaN: a probe of
        # its footprint) or ("lattice", moduli, residues) (those whose index is residues modulo moduli)
        self.group = group
        self.shapes: list[tuple[int, ...] | None] = []  # per step, its output's shape (None: several outputs)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        schema = func._schema
        if schema.is_mutable or _name(func) in EXACT or any(r.alias_info is not None for r in schema.returns):
            return func(*args, **kwargs)
        from torch._decomp import decomposition_table

        decomposition = decomposition_table.get(func)
        if torch.Tag.pointwise in func.tags or (decomposition is not None and _primitive(decomposition)
                                                 and not _with_statistics(func)):
            decomposition = None  # one rounding already (sub, exp); torch's primitives (a sum) are steps
        with self:  # the parts of a decomposition are steps of their own
            out = decomposition(*args, **kwargs) if decomposition is not None else func.decompose(*args, **kwargs)
        if out is not NotImplemented:
            return out
        out = func(*args, **kwargs)
        if not any(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in (out if isinstance(out, (tuple, list)) else (out,))):
            return out  # a comparison, an index: nothing rounded
        step, self.steps = self.steps, self.steps + 1
        self.shapes.append(tuple(out.shape) if isinstance(out, torch.Tensor) else None)
        if self.moved is None or step % MAX_STEPS != self.moved:
            return out
        sized = None if torch.Tag.pointwise in func.tags else _on_absolute(func, args, kwargs)
        if isinstance(out, (tuple, list)):
            sized = sized if isinstance(sized, (tuple, list)) and len(sized) == len(out) else (None,) * len(out)
            return type(out)(self._round(t, s) for t, s in zip(out, sized))
        return self._round(out, sized)

    def _round(self, t, sized=None):
        """``t`` moved by a rounding of relative size u, with a random sign per element: of |t|, or
        of ``sized`` where larger (a sum's terms, the step run on its inputs' absolute values); only
        the elements of ``group`` where one is given."""
        if not (isinstance(t, torch.Tensor) and t.dtype == torch.float64):
            return t
        if self.group is not None and self.group[0] == "at":  # a NaN reaches every output element that
            at = self.group[1]                                  # depends on it, whatever the values
            if len(at) != t.dim() or any(i >= n for i, n in zip(at, t.shape)):
                return t
            moved = t.clone()
            moved[at] = float("nan")
            return moved
        negative = torch.rand(t.shape, generator=self.gen, dtype=torch.float64) < 0.5
        sign = (1.0 - 2.0 * negative.to(torch.float64)).to(t.device)
        size = t.abs()
        if isinstance(sized, torch.Tensor) and sized.shape == t.shape and sized.is_floating_point():
            size = torch.fmax(size, torch.where(torch.isfinite(sized), sized.abs(), torch.zeros_like(size)))
        if self.group is None:
            return t + self.u * sign * size
        return t + self.u * sign * size * _lattice(t.shape, *self.group[1:]).to(t.device)


def _lattice(shape, moduli, residues) -> torch.Tensor:
    """1.0 where an element's index is ``residues`` modulo ``moduli`` (per axis), else 0.0."""
    mask = torch.ones((), dtype=torch.float64)
    for d, (n, m, r) in enumerate(zip(shape, moduli, residues)):
        axis = (torch.arange(n) % m == r).to(torch.float64)
        mask = mask * axis.reshape([n if k == d else 1 for k in range(len(shape))])
    return mask.expand(shape)


def _on_absolute(func, args, kwargs):
    """A step that is no elementwise operation (a convolution, a matmul, a sum over a dim) run on
    its float inputs' absolute values: the terms it sums, whose fp32 rounding a kernel's result
    carries (a convolution of mixed-scale inputs whose output is a small difference of large
    products); None where it cannot be run so."""
    def absolute(a):
        return a.abs() if isinstance(a, torch.Tensor) and a.is_floating_point() else a

    try:
        return func(*tree_map(absolute, list(args)), **tree_map(absolute, dict(kwargs)))
    except Exception:  # noqa: BLE001 - |result| stands
        return None


def _primitive(decomposition) -> bool:
    """A decomposition into torch's primitives (torch._refs), whose parts round as the operator
    does and whose wrappers import torch._dynamo (seconds) on first use."""
    module = getattr(decomposition, "__module__", "") or ""
    return module.startswith(("torch._refs", "torch._prims"))


def _with_statistics(func) -> bool:
    """An operator that returns statistics with its result (a group or layer norm: y, mean, rstd):
    a composite whose parts are steps, even where its decomposition is torch's primitives. Its
    result cancels an offset (x - mean, or fp32's scale-and-shift form x * rstd - mean * rstd), so
    a kernel's result carries the rounding of the mean, of the size of |x| / std, where the
    operator moved as one step shows a rounding of |y| only (a group of two features: y = +-1
    however the pair moves)."""
    returns = func._schema.returns
    return len(returns) > 1 and all(str(r.type) == "Tensor" for r in returns)


def _first(out) -> torch.Tensor | None:
    out = out[0] if isinstance(out, (tuple, list)) and out else out
    return out if isinstance(out, torch.Tensor) and out.is_floating_point() else None


def terms(fn: Callable, args: Sequence, u: float, base: torch.Tensor | None = None) -> torch.Tensor | None:
    """Per element of ``fn(*args)`` (its first output; ``args`` in float64), the size of the terms
    whose rounding reaches it, in units of ``u`` (module docstring); None where ``fn`` cannot be
    run step by step (the caller's terms stand)."""
    try:
        with torch.no_grad():
            if base is None:
                base = _first(fn(*args))
            counter = _Rounding(u, None, None)
            with counter:
                plain = _first(fn(*args))
            if base is None or plain is None or plain.shape != base.shape or counter.steps < 2:
                return None  # one step: its rounding is the output's own, which the error model adds
            gen = torch.Generator().manual_seed(SEED)
            total = torch.zeros_like(base, dtype=torch.float64)
            plain = plain.to(torch.float64)
            for step in range(min(counter.steps, MAX_STEPS)):
                # one step per index (no deeper model's steps sharing it): its footprint can be probed
                shape = counter.shapes[step] if counter.steps <= MAX_STEPS else None
                groups, copies = groups_of(fn, args, u, step, shape, plain)
                squares = torch.zeros_like(total)
                for group in groups:
                    worst = torch.zeros_like(total)
                    for _ in range(copies):
                        with _Rounding(u, step, gen, group):
                            out = _first(fn(*args))
                        if out is None or out.shape != base.shape:
                            return None
                        d = (out.to(torch.float64) - plain).abs()
                        worst = torch.maximum(worst, torch.where(torch.isfinite(d), d, torch.zeros_like(d)))
                    squares = squares + worst * worst
                total = total + squares.sqrt()
    except Exception:  # noqa: BLE001 - an estimate only: the caller's terms stand
        return None
    return total / u


def groups_of(fn: Callable, args: Sequence, u: float, step: int, shape: tuple[int, ...] | None,
              plain: torch.Tensor) -> tuple[list, int]:
    """The groups of ``step``'s elements moved in runs of their own, and the random-sign copies
    of each: per axis of the step's output, a modulus at least the span of the output elements
    one of its elements reaches along that axis (probed: one element made NaN, where NaN comes out),
    so that each output element depends on one element of each group at most (``MAX_GROUPS``
    groups or fewer, one copy each: the signs change nothing); moduli halved until there are
    ``PARTIAL_GROUPS`` or fewer where more are needed (COPIES copies each); the whole step
    (``[None]``, COPIES copies) where the footprint is unknown (no probed element reaches an output
    element, or the output's axes are not the step's)."""
    whole = ([None], COPIES)
    if shape is None or not shape or plain.dim() != len(shape):
        return whole
    gen = torch.Generator().manual_seed(SEED + step)
    tries = [tuple(n // 2 for n in shape)] + [tuple(int(torch.randint(0, n, (1,), generator=gen)) for n in shape)
                                             for _ in range(PROBES - 1)]
    reached = None
    for at in tries:
        with _Rounding(u, step, None, ("at", at)):
            out = _first(fn(*args))
        if out is None or out.shape != plain.shape:
            return whole
        changed = torch.isnan(out) & ~torch.isnan(plain)
        if bool(changed.any()):
            reached = changed.nonzero()
            break
    if reached is None:
        return whole
    moduli = []
    for d, n in enumerate(shape):
        if n == 1:
            moduli.append(1)
        elif plain.shape[d] == n:  # the same axis: the span it reaches
            moduli.append(min(n, int(reached[:, d].max() - reached[:, d].min()) + 1))
        else:  # reduced (or resized) along it: every element of the axis may reach the same output element
            moduli.append(n)
    count = math.prod(moduli)
    copies = 1
    if count > MAX_GROUPS:
        copies = COPIES
        while math.prod(moduli) > PARTIAL_GROUPS:
            d = max(range(len(moduli)), key=lambda k: moduli[k])
            moduli[d] = (moduli[d] + 1) // 2
    residues = itertools.product(*(range(m) for m in moduli))
    return [("lattice", tuple(moduli), r) for r in residues], copies


def gradient_terms(fn: Callable, args: Sequence, grad_wrt: Sequence[int], upstream: Sequence[torch.Tensor],
                   u: float) -> tuple[torch.Tensor | None, ...] | None:
    """Per input in ``grad_wrt``, per element of its gradient (``fn``'s outputs, in float64,
    pulled back by ``upstream``), the size of the terms whose rounding reaches it, in units of
    ``u``: as ``terms``, with the steps of the forward and of the backward (autograd's own, a
    softmax's and a matmul's) moved one at a time. A gradient that is a sum over classes of
    terms that cancel (dx = sum_k dlogit_k W_k, where two classes' weights are near or exactly
    equal) is computed in fp32 with the roundings of those terms, not of the result. None where
    ``fn`` cannot be run so (the caller's terms stand)."""

    def grads(mode: _Rounding | None) -> tuple[torch.Tensor | None, ...] | None:
        leaves = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        for p in grad_wrt:
            leaves[p] = leaves[p].clone().requires_grad_(True)
        with torch.enable_grad():
            if mode is None:
                res, up = _pair(fn(*leaves), upstream)
                got = torch.autograd.grad(res, [leaves[p] for p in grad_wrt], grad_outputs=up, allow_unused=True)
            else:
                with mode:
                    res, up = _pair(fn(*leaves), upstream)
                    got = torch.autograd.grad(res, [leaves[p] for p in grad_wrt], grad_outputs=up, allow_unused=True)
        return tuple(g.detach() if g is not None else None for g in got)

    try:
        counter = _Rounding(u, None, None)
        plain = grads(counter)
        if counter.steps < 2:
            return None
        gen = torch.Generator().manual_seed(SEED)
        total = [torch.zeros_like(g, dtype=torch.float64) if g is not None else None for g in plain]
        for step in range(min(counter.steps, MAX_STEPS)):
            worst = [torch.zeros_like(t) if t is not None else None for t in total]
            for _ in range(COPIES):
                moved = grads(_Rounding(u, step, gen))
                for j, (g, b) in enumerate(zip(moved, plain)):
                    if g is None or b is None or g.shape != b.shape:
                        continue
                    d = (g.to(torch.float64) - b.to(torch.float64)).abs()
                    worst[j] = torch.maximum(worst[j], torch.where(torch.isfinite(d), d, torch.zeros_like(d)))
            total = [t + w if t is not None else None for t, w in zip(total, worst)]
    except Exception:  # noqa: BLE001 - an estimate only: the caller's terms stand
        return None
    return tuple(t / u if t is not None else None for t in total)


def _pair(out, upstream: Sequence[torch.Tensor]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The outputs that carry a gradient and their upstream gradients."""
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != len(upstream) or any(o.shape != g.shape for o, g in zip(outs, upstream)):
        raise ValueError("the outputs and the upstream gradients differ")
    used = [(o, g) for o, g in zip(outs, upstream) if isinstance(o, torch.Tensor) and o.requires_grad]
    return [o for o, _ in used], [g for _, g in used]
