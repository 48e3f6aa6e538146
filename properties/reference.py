"""An op declared from a plain torch function and example inputs: ``harness.from_reference``.

    op = from_reference(lambda x, w: torch.softmax(x * w, -1), (torch.randn(8, 300), torch.randn(300)),
                        vary={"x": ("M", "N"), "w": ("N",)}, name="scaled_softmax")

    @register_kernel(op.name, name="mine")
    def mine(x, w): ...

The declaration (harness.registry.declare.OpDecl) is inferred from the example arguments: each
float tensor is a ``Tensor`` whose dims are symbolic, each int64 tensor an ``Index`` (its values
bounded by the smallest dim that exceeds them), each Python number, bool or mode name a
``Scalar`` of that one value. Input names are the function's parameter names (``forward``'s for
an ``nn.Module``).

``vary`` says which dims cases may change: ``{"x": ("M", "N"), "w": (None, "N")}`` names each
tensor's dims, one name per axis; a name shared between axes ties them (always the same size),
``None`` keeps that axis at the example's size, and a tensor left out keeps all its dims. With
``vary="auto"`` the dims are found by trying the reference: each axis alone, then tied with
one axis of the same size in another input, then with all of them, at the example's size + 1
and half of it; an axis the reference accepts at both varies. The default varies nothing: every
case has the example's shapes (and every dtype, layout, value kind and seed).

The cases, the float64 oracle and the error model are those of every declared op
(properties.derive.DeclaredOp), with what a torch function does not say filled in:
- the terms the formula sums or cancels (``OpDecl.terms``): the reference (or ``magnitude``, a
  function of the same arguments) on the inputs' absolute values, at least |result|: for a
  sum or a product of matrices that is sum |x| and |a| @ |b|, the size an fp32 accumulation
  rounds;
- the longest sum (``OpDecl.reduces``): the largest dim unless ``reduces`` names the dims;
  ``reduces=()`` for an elementwise op;
- value kinds: the row kinds every op gets (values.ROW_KINDS); where the reference is invariant
  to shifting a float input's rows (softmax, log-softmax), also the logit kinds and
  ``shift_by_max`` for that input; where it is invariant to shifting and scaling them (a
  normalisation), the normalisation kinds, and the terms grow to what cancelling the rows'
  offset costs: the reference's response to a relative move of that input's elements (a
  layer norm's |x| / std, where the hand declaration, properties/ops/layer_norm.py, says the
  centred row in units of the offset it cancels).
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Callable

import torch

from harness.compare import rounding
from harness.errors import RegistryError
from harness.reference import intermediates
from harness.registry.declare import Index, OpDecl, Scalar, Tensor
from harness.errors import UsageError
from properties import beyond, row_kinds, strategies, values
from properties.derive import DeclaredOp, unique

AUTO = "auto"
TRIAL_SEED = 1234


class ReferenceOp(DeclaredOp):
    """A DeclaredOp whose dims not varied stay at the example's size, whose first floor shape is
    the example's, and whose output shape is read from the reference."""

    def __init__(self, decl: OpDecl, *, example: dict[str, int], fixed: tuple[str, ...], varying: tuple[str, ...],
                 out_names: tuple[str | None, ...], shape_of: Callable[[dict[str, int]], tuple[int, ...]],
                 declared_at: str = "") -> None:
        super().__init__(decl, declared_at=declared_at)
        self.example, self.fixed, self.varying = dict(example), fixed, varying
        self.out_names, self.shape_of = out_names, shape_of
        self._shapes: dict[tuple, tuple[int, ...]] = {}
        self._summed: dict[tuple, int] = {}
        self.dtypes: tuple[torch.dtype, ...] = strategies.DTYPES  # the dtypes of its cases (from_reference's dtypes)
        self.lower: dict[str, int] = {}  # the smallest size the reference accepts, per varying dim (domain.lower_bounds)
        self.function: Callable | None = None  # the reference as given (in_dtype casts it)
        self._cast: dict[tuple, Callable] = {}

    def oracle(self, inputs) -> dict[str, torch.Tensor]:
        """The float64 oracle, with NaN also accepted where it is +-inf and the reference run in
        the case's dtype gives NaN (harness.compare.nonfinite.own_nans)."""
        from harness.compare import nonfinite

        expected = super().oracle(inputs)
        names = [self.oracle_forward_name(inputs), *self.output_checks[1:]]
        if any(bool(torch.isinf(expected[n]).any()) for n in names if isinstance(expected.get(n), torch.Tensor)):
            nonfinite.own_nans(expected, names, self.in_dtype(inputs))
        return expected

    def in_dtype(self, inputs) -> tuple[torch.Tensor | None, ...]:
        """The reference's outputs run in the case's dtype on the case's own inputs (its float
        parameters cast to that dtype); () where it cannot run so."""
        if self.function is None:
            return ()
        device = next((a.device for a in inputs.args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        key = (inputs.dtype, str(device))
        try:
            if key not in self._cast:
                self._cast[key] = in_dtype(self.function, inputs.dtype, device)
            with torch.no_grad():
                out = self._cast[key](*[a.detach() if isinstance(a, torch.Tensor) else a for a in inputs.args])
        except Exception:  # noqa: BLE001 - no run in that dtype: the float64 oracle's answer stands alone
            return ()
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def complete(self, sizes: dict[str, int]) -> dict[str, int]:
        out = super().complete(sizes)
        out.update({d: self.example[d] for d in self.fixed})
        out.update({d: max(out[d], n) for d, n in self.lower.items() if d in out})
        return out

    def sum_lengths(self, inputs) -> list[int]:
        """The declared lengths, or where longer the terms an output element actually sums
        (harness.reference.summed: a convolution's channels x window, a norm over every element)."""
        from harness.reference.summed import summed_length

        lengths = super().sum_lengths(inputs)
        key = tuple(tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in inputs.args)
        if key not in self._summed:  # a function of the shapes: read once per shape
            self._summed[key] = summed_length(self.decl.reference, inputs.args)
        return [max(length, self._summed[key]) for length in lengths]

    def outside_domain(self, inputs) -> str | None:
        """Why the reference rejects this case's inputs (harness.reference.domain), or None."""
        from harness.reference import domain

        return domain.rejection(self.decl.reference, inputs.args)

    def floor_shapes(self, backend: str, dims=None, base=None) -> list[dict[str, int]]:
        shapes = [self.complete(self.example)]  # the example's own shape, never shrunk
        for shape in super().floor_shapes(backend, dims=self.varying, base=self.example):
            if shape not in shapes:
                shapes.append(shape)
        return shapes

    def floor_cases(self, *, backend: str) -> list:
        """The floor's cases, then one per varying dim beyond the example's size (properties.beyond),
        in the op's dtypes."""
        return unique([c for c in super().floor_cases(backend=backend) + beyond.cases(self, backend)
                       if c.get("dtype") in self.dtype_names()])

    def case_strategy(self, *, backend: str):
        return super().case_strategy(backend=backend).filter(lambda c: c.get("dtype") in self.dtype_names())

    def dtype_names(self) -> tuple[str, ...]:
        return tuple(strategies.dtype_name(d) for d in self.dtypes)

    def validate_case(self, case) -> None:
        if case.get("dtype") not in self.dtype_names():
            raise UsageError(f"--case {case.id}: dtype={case.get('dtype')} is not allowed; op {self.name} is "
                             f"checked in {', '.join(self.dtype_names())}")
        for d in self.fixed:
            if case.get(d) != self.example[d]:
                raise UsageError(f"--case {case.id}: {d}={case.get(d)} is not allowed; {d} is fixed at {self.example[d]}")
        super().validate_case(case)

    def output_dims(self, sizes: dict[str, int]) -> list[tuple[str | None, int]]:
        key = tuple(sizes[d] for d in self.dims)
        if key not in self._shapes:
            try:
                self._shapes[key] = self.shape_of(sizes)
            except Exception:  # noqa: BLE001 - outside the domain: the case is not run (outside_domain says why),
                # its upstream gradient of the example's output shape is never used
                self._shapes[key] = self.shape_of(self.example)
        return list(zip(self.out_names, self._shapes[key]))


def from_reference(fn: Callable, example_args, vary: dict | str | None = None, name: str | None = None, *,
                   differentiable: bool = True, reduces: tuple[str, ...] | None = None,
                   value_kinds: tuple[str, ...] | None = None, magnitude: Callable | None = None,
                   register: bool = True, doc: str = "", dtypes: tuple[torch.dtype, ...] | None = None) -> ReferenceOp:
    """Declare (and register) the op that ``fn`` computes, inferred from ``example_args``; the module
    docstring says how. ``differentiable=False`` checks the forward only; ``dtypes`` (default: fp32,
    fp16 and bf16) the dtypes of its cases."""
    args = tuple(example_args)
    names = _names(fn, len(args))
    name = name or getattr(fn, "__name__", None)
    if not (isinstance(name, str) and name.isidentifier()):
        raise RegistryError(f"from_reference: name={name!r}; give the op a name that is an identifier")
    kinds = [_kind(n, a) for n, a in zip(names, args)]
    tensors = {n: a for n, a, k in zip(names, args, kinds) if k != "scalar"}
    if not any(k == "float" for k in kinds):
        raise RegistryError(f"from_reference {name!r}: no float tensor among the example arguments")
    trial = _Trial(fn, names, args, kinds)
    base = trial.run({})
    dims, varying = _auto_dims(trial, tensors) if vary == AUTO else _named_dims(vary or {}, tensors)
    example = {d: int(tensors[n].shape[a]) for (n, a), d in dims.items()}
    fixed = tuple(d for d in dict.fromkeys(dims.values()) if d not in varying)
    out_names = _output_names(trial, base, dims, varying, example)
    inputs = []
    for n, a, k in zip(names, args, kinds):
        if k == "scalar":
            inputs.append(Scalar(n, (a,)))
            continue
        shape = tuple(dims[(n, i)] for i in range(a.dim()))
        if k == "float":
            inputs.append(Tensor(n, shape, differentiable=differentiable))
        else:
            inputs.append(Index(n, shape, high=_high(n, a, dims, tensors)))
    shift, norm = _invariances(trial, names, kinds, base) if value_kinds is None else ((), ())
    kinds_ = value_kinds or (values.ROW_KINDS + (row_kinds.LOGITS if shift else ())
                             + (row_kinds.NORMALISATION if norm else ()))
    magnitude = magnitude or fn
    grad_wrt = [p for p, i in enumerate(inputs) if isinstance(i, Tensor) and i.differentiable]
    cancels = [names.index(n) for n in norm]
    decl = OpDecl(
        name=name,
        signature=_signature(inputs, out_names, base),
        inputs=tuple(inputs),
        output=(),  # the output's shape is read from the reference (ReferenceOp.output_dims)
        reference=trial.call,
        terms=lambda *a: (_terms(trial, magnitude, a[:-1], cancels),
                          *_grad_terms(trial, magnitude, a[:-1], a[-1], grad_wrt)),
        reduces=tuple(dict.fromkeys(dims.values())) if reduces is None else tuple(reduces),
        shift_by_max=tuple(shift),
        value_kinds=tuple(kinds_),
        doc=doc or f"{name}: declared from a torch reference (properties.reference).",
    )
    caller = inspect.currentframe().f_back
    lower = _lower_bounds(trial, dims, varying, example)
    op = ReferenceOp(decl, example=example, fixed=fixed, varying=varying, out_names=out_names,
                     shape_of=lambda sizes: tuple(trial.run(_by_axis(dims, sizes)).shape),
                     declared_at=f"{caller.f_code.co_filename}:{caller.f_lineno}")
    op.lower = lower
    op.function = fn
    if dtypes is not None:
        bad = [d for d in dtypes if d not in strategies.DTYPES]
        if not dtypes or bad:
            raise RegistryError(f"from_reference {name!r}: dtypes={tuple(dtypes)!r}; choose from {strategies.DTYPES}")
        op.dtypes = tuple(dtypes)
    if register:
        from harness.registry.registry import REGISTRY

        REGISTRY.add_op(op)
    return op


# --- inference -------------------------------------------------------------------------------

def _names(fn: Callable, n: int) -> list[str]:
    forward = getattr(fn, "forward", None)  # an nn.Module, or a wrapper of one that keeps its forward
    target = forward if callable(forward) and not inspect.isroutine(fn) else fn
    try:
        params = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        p = params[i] if i < len(params) and params[i].kind in (params[i].POSITIONAL_ONLY, params[i].POSITIONAL_OR_KEYWORD) else None
        names.append(p.name if p is not None and p.name.isidentifier() else f"arg{i}")
    return names


def _kind(name: str, a: Any) -> str:
    if isinstance(a, torch.Tensor):
        if a.is_floating_point():
            if a.dim() == 0:
                raise RegistryError(f"from_reference: input {name!r} is a 0-d tensor; pass a number (a Scalar) instead")
            return "float"
        if a.dtype in (torch.int64, torch.int32) and a.dim() > 0:
            return "index"
        raise RegistryError(f"from_reference: input {name!r} is a {a.dtype} tensor of {a.dim()} dims; only float "
                            "tensors, int64 index tensors and numbers are supported")
    if isinstance(a, (bool, int, float)) or (isinstance(a, str) and a.replace("_", "a").isalnum()):
        return "scalar"
    raise RegistryError(f"from_reference: input {name!r} is a {type(a).__name__}; only tensors, numbers, bools and "
                        "mode names are supported")


class _Trial:
    """The reference on inputs of given sizes (seeded random values): the float64 oracle's call,
    and the probe of which sizes it accepts."""

    def __init__(self, fn, names, args, kinds):
        self.fn, self.names, self.args, self.kinds = fn, names, args, kinds

    def call(self, *args):
        return self.fn(*args)

    def inputs(self, sizes: dict[tuple[str, int], int], transform=None) -> list[Any]:
        gen = torch.Generator().manual_seed(TRIAL_SEED)
        out = []
        for n, a, k in zip(self.names, self.args, self.kinds):
            if k == "scalar":
                out.append(a)
                continue
            shape = tuple(sizes.get((n, i), s) for i, s in enumerate(a.shape))
            if k == "float":
                t = torch.randn(shape, generator=gen, dtype=torch.float64)
                out.append(transform(n, t) if transform else t)
            else:
                high = int(a.max()) + 1 if a.numel() else 1
                # within the dim that bounds it (another input's axis of the example's size max + 1),
                # at that dim's size in this trial: targets stay classes when the class dim shrinks
                bounds = [sizes[(m, i)] for m, b in zip(self.names, self.args) if m != n and isinstance(b, torch.Tensor)
                          for i, s in enumerate(b.shape) if s == high and (m, i) in sizes]
                high = min([high, *bounds])
                out.append(torch.randint(0, max(1, high), shape, generator=gen, dtype=a.dtype))
        return out

    def run(self, sizes: dict[tuple[str, int], int], transform=None) -> torch.Tensor:
        with torch.no_grad():
            out = self.fn(*self.inputs(sizes, transform))
        if not (isinstance(out, torch.Tensor) and out.is_floating_point()):
            raise RegistryError(f"from_reference: the reference must return one float tensor, got {type(out).__name__}"
                                + (f" of {out.dtype}" if isinstance(out, torch.Tensor) else ""))
        return out

    def accepts(self, units: list[tuple[str, int]], size: int) -> bool:
        """Whether the reference takes ``units`` at ``size``: it neither raises nor reads past its
        inputs' memory there (harness.reference.domain.reads_outside)."""
        from harness.reference import domain

        sizes = {u: size for u in units}
        try:
            args = self.inputs(sizes)
            with torch.no_grad():
                out = self.fn(*[domain.padded(a) for a in args])
            return not domain.reads_outside(self.fn, args, out)
        except Exception:  # the reference refuses that shape: the dims do not vary (so)
            return False


def _trial_sizes(s: int) -> list[int]:
    return sorted({s + 1, max(1, s // 2)} - {s})


def _auto_dims(trial: _Trial, tensors: dict[str, torch.Tensor]) -> tuple[dict[tuple[str, int], str], tuple[str, ...]]:
    """Each axis's dim, and the dims that vary, found by trying the reference (module docstring)."""
    units = [(n, a) for n, t in tensors.items() for a in range(t.dim())]
    size = {(n, a): int(tensors[n].shape[a]) for n, a in units}
    dims: dict[tuple[str, int], str] = {}
    varying: list[str] = []
    for u in units:
        if u in dims:
            continue
        others = [v for v in units if v not in dims and v[0] != u[0] and size[v] == size[u]]
        others.sort(key=lambda v: v[1] != u[1])  # the same axis of another input first (a batch dim)
        for group in [[u]] + [[u, v] for v in others] + ([[u, *others]] if len(others) > 1 else []):
            if all(trial.accepts(group, s) for s in _trial_sizes(size[u])):
                varying.append(f"{u[0]}_{u[1]}")
                dims.update({v: varying[-1] for v in group})
                break
    for u in units:
        dims.setdefault(u, f"{u[0]}_{u[1]}")
    return dims, tuple(varying)


def _named_dims(vary: dict, tensors: dict[str, torch.Tensor]) -> tuple[dict[tuple[str, int], str], tuple[str, ...]]:
    if not isinstance(vary, dict):
        raise RegistryError(f"from_reference: vary={vary!r}; pass a dict such as {{'x': ('M', 'N')}} or 'auto'")
    dims: dict[tuple[str, int], str] = {}
    sizes: dict[str, int] = {}
    for n, spec in vary.items():
        if n not in tensors:
            raise RegistryError(f"from_reference: vary names {n!r}, which is no tensor input ({', '.join(tensors)})")
        spec = tuple(d.strip() for d in spec.split(",")) if isinstance(spec, str) else tuple(spec)
        t = tensors[n]
        if len(spec) != t.dim():
            raise RegistryError(f"from_reference: vary[{n!r}]={spec!r} names {len(spec)} dims; {n} has {t.dim()}")
        for a, d in enumerate(spec):
            if d is None:
                continue
            if not (isinstance(d, str) and d.isidentifier()):
                raise RegistryError(f"from_reference: vary[{n!r}] dim {d!r} must be a name such as N, or None")
            if sizes.setdefault(d, int(t.shape[a])) != int(t.shape[a]):
                raise RegistryError(f"from_reference: dim {d} is tied across inputs but the examples give it sizes "
                                    f"{sizes[d]} and {int(t.shape[a])}")
            dims[(n, a)] = d
    varying = tuple(dict.fromkeys(dims.values()))
    for n, t in tensors.items():
        for a in range(t.dim()):
            if (n, a) not in dims and f"{n}_{a}" in varying:
                raise RegistryError(f"from_reference: dim name {n}_{a} is the name of the fixed axis {a} of {n}; "
                                    "choose another")
            dims.setdefault((n, a), f"{n}_{a}")
    return dims, varying


def _lower_bounds(trial: _Trial, dims, varying, example) -> dict[str, int]:
    """Per varying dim, the smallest size the reference accepts (harness.reference.domain)."""
    from harness.reference import domain

    return domain.lower_bounds(lambda d, n: trial.accepts([u for u, dd in dims.items() if dd == d], n),
                               example, varying)


def _by_axis(dims: dict[tuple[str, int], str], sizes: dict[str, int]) -> dict[tuple[str, int], int]:
    return {u: sizes[d] for u, d in dims.items()}


def _output_names(trial: _Trial, base: torch.Tensor, dims, varying, example) -> tuple[str | None, ...]:
    """Per output axis, the varying dim it follows (None: it stays as it is)."""
    names: list[str | None] = [None] * base.dim()
    for d in varying:
        s = example[d] + 1
        try:
            out = trial.run({u: s for u, dd in dims.items() if dd == d})
        except Exception as exc:
            raise RegistryError(f"from_reference: the reference fails when {d} changes from {example[d]} to {s}: "
                                f"{type(exc).__name__}: {exc}") from None
        if out.dim() != base.dim():
            raise RegistryError(f"from_reference: the output's rank changes with {d}; vary fewer dims")
        for k, (a, b) in enumerate(zip(base.shape, out.shape)):
            if a != b and names[k] is None:
                names[k] = d
    return tuple(names)


def _high(name: str, a: torch.Tensor, dims, tensors) -> str:
    top = int(a.max()) if a.numel() else 0
    bounds = sorted({(int(tensors[n].shape[x]) != top + 1, int(tensors[n].shape[x]), d)
                     for (n, x), d in dims.items() if n != name and int(tensors[n].shape[x]) > top})
    if not bounds or int(a.min()) < 0:
        raise RegistryError(f"from_reference: the values of index input {name!r} (0..{top}) are bounded by no dim of "
                            "another input; declare the op with harness.OpDecl and Index(..., high=DIM)")
    return bounds[0][2]


def _invariances(trial: _Trial, names, kinds, base) -> tuple[list[str], list[str]]:
    """Float inputs whose rows the reference is invariant to shifting (softmax: shift_by_max),
    and to shifting and scaling (a normalisation)."""
    shift, norm = [], []
    for n, k in zip(names, kinds):
        if k != "float":
            continue

        def moved(scale):
            return lambda m, t: (t * scale + 3.0 + torch.rand(t.shape[:-1] + (1,), dtype=t.dtype)) if m == n else t

        try:
            shifted = trial.run({}, moved(1.0))
            scaled = trial.run({}, moved(2.5))
        except Exception:
            continue
        if shifted.shape == base.shape and torch.allclose(shifted, base, rtol=1e-9, atol=1e-12):
            if scaled.shape == base.shape and torch.allclose(scaled, base, rtol=1e-4, atol=1e-6):  # eps breaks exactness
                norm.append(n)
            else:
                shift.append(n)
    return shift, norm


def _terms(trial: _Trial, magnitude: Callable, args, cancels: list[int] = ()) -> torch.Tensor:
    with torch.no_grad():
        result = trial.call(*args).abs()
        absolute = [a.abs() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        try:
            sized = magnitude(*absolute).abs()
        except Exception:  # noqa: BLE001 - the magnitude is a bound only; |result| stands in
            sized = result
        if sized.shape != result.shape:
            sized = result
        out = torch.fmax(result, torch.where(torch.isfinite(sized), sized, torch.zeros_like(sized)))
        if cancels:
            out = torch.fmax(out, _cancelled(trial, args, cancels, result))
        steps = intermediates.terms(trial.call, args, rounding.unit_roundoff(torch.float32))
        if steps is not None and steps.shape == out.shape:  # the terms its intermediate steps cancel
            out = torch.fmax(out, steps.to(out.device, out.dtype))
    return out


def _grad_terms(trial: _Trial, magnitude: Callable, args, upstream: torch.Tensor, grad_wrt: list[int]):
    """Per gradient, the size of the terms its formula sums or cancels: the largest of |the
    gradient|, the gradient for |upstream| (the upstream's signs cancel a broadcast input's sum) and the
    gradient of ``magnitude`` on the inputs' absolute values for |upstream|, as for the
    forward's terms. A derivative evaluated where it is tiny cancels terms of the size it has
    where the inputs are positive (gelu's 1 + tanh(u) near u = -4: each term about 1, their sum
    1e-3), and fp32 rounds those terms, not the tiny result."""
    if not grad_wrt:
        return ()
    out = [None] * len(grad_wrt)
    for fn, absolute, up in ((trial.call, False, upstream), (trial.call, False, upstream.abs()),
                             (magnitude, True, upstream.abs())):
        leaves = [a.detach().abs() if absolute and isinstance(a, torch.Tensor) and a.is_floating_point()
                  else a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        for p in grad_wrt:
            leaves[p] = leaves[p].clone().requires_grad_(True)
        try:
            with torch.enable_grad():
                res = fn(*leaves)
                if res.shape != up.shape:
                    continue
                grads = torch.autograd.grad(res, [leaves[p] for p in grad_wrt], grad_outputs=up, allow_unused=True)
        except Exception:  # noqa: BLE001 - a bound only; the default terms stand in
            continue
        for j, (g, p) in enumerate(zip(grads, grad_wrt)):
            if g is None or g.shape != args[p].shape:
                continue
            g = g.detach().abs()
            g = torch.where(torch.isfinite(g), g, torch.zeros_like(g))
            out[j] = g if out[j] is None else torch.fmax(out[j], g)
    return tuple(out)


SENSITIVITY_STEP = 2.0 ** -20
SENSITIVITY_COPIES = 4


def _cancelled(trial: _Trial, args, positions: list[int], result: torch.Tensor) -> torch.Tensor:
    """For the inputs whose row offset the reference cancels (a normalisation): per output
    element, the largest response to moving each of their elements by a relative step of +-h,
    over a few seeded sign patterns, divided by h. A kernel cancels the offset in fp32 (x - mean
    of a row 1e4 + N(0, 1)): its rounding is a few ulps of the offset, scaled up by 1 / std, the
    size this estimates; the oracle's spread measures it at the inputs' own rounding only."""
    base = trial.call(*args)
    gen = torch.Generator().manual_seed(TRIAL_SEED)
    worst = torch.zeros_like(result)
    for p in positions:
        t = args[p]
        for _ in range(SENSITIVITY_COPIES):
            sign = 1.0 - 2.0 * (torch.rand(t.shape, generator=gen, dtype=torch.float64, device=gen.device) < 0.5).to(torch.float64)
            moved = list(args)
            moved[p] = t * (1.0 + SENSITIVITY_STEP * sign.to(t.device))
            try:
                out = trial.call(*moved)
            except Exception:  # noqa: BLE001 - a bound only
                continue
            if out.shape != base.shape:
                continue
            d = (out.to(torch.float64) - base.to(torch.float64)).abs() / SENSITIVITY_STEP
            worst = torch.maximum(worst, torch.where(torch.isfinite(d), d, torch.zeros_like(d)))
    return worst


def _signature(inputs, out_names, base) -> str:
    parts = [f"{i.name}[{', '.join(i.shape)}]" if not isinstance(i, Scalar) else f"{i.name}={i.values[0]!r}"
             for i in inputs]
    out = ", ".join(d if d is not None else str(s) for d, s in zip(out_names, base.shape))
    return f"f({', '.join(parts)}) -> y[{out}]"


def in_dtype(fn: Callable, dtype: torch.dtype, device) -> Callable:
    """``fn`` with its float parameters and buffers in ``dtype``: an ``nn.Module`` copied and cast
    (on ``device``), a wrapper of one through its ``cast(dtype)``, a plain function as it is (its
    arguments' dtype is the case's)."""
    if isinstance(fn, torch.nn.Module):
        return copy.deepcopy(fn).to(device=device, dtype=dtype)
    cast = getattr(fn, "cast", None)
    return cast(dtype) if callable(cast) else fn


def absolute(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` with the absolute values of its float parameters and buffers: as
    ``magnitude``, the size of the terms its products sum."""
    out = copy.deepcopy(module)
    with torch.no_grad():
        for t in list(out.parameters()) + list(out.buffers()):
            if t.is_floating_point():
                t.abs_()
    return out
