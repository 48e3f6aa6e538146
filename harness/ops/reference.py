"""An op declared from a plain torch function and example inputs: ``harness.from_reference``.

    op = from_reference(lambda x, w: torch.softmax(x * w, -1), (torch.randn(8, 300), torch.randn(300)),
                        vary={"x": ("M", "N"), "w": ("N",)}, name="scaled_softmax")

    @register_kernel(op.name, name="mine")
    def mine(x, w): ...

The declaration (harness.registry.declare.OpDecl) is inferred from the example arguments: each
float tensor is a ``Tensor`` whose dims are symbolic, each int64 tensor an ``Index`` (its values
bounded by the smallest dim that exceeds them), each bool tensor a mask (``Tensor(values="bool")``:
drawn true at densities from none to all, never differentiable), each Python number, bool or
mode name a ``Scalar`` of that one value. An integer or bool output (argmax's indices) is
compared exactly: the kernel returns the reference's dtype, and any element that differs fails
(harness.compare.allclose); a reference whose outputs are all integers is checked forward only. Input names are the function's parameter names (``forward``'s for
an ``nn.Module``).

What the example arguments cannot say is given by keyword: ``no_grad`` (float inputs that get no
gradient), ``input_kinds`` (an input's own value kinds, such as probability rows, or source),
``ignore_index`` (the int parameter whose value an index input's entries may take: cases ignore
none, some or all rows) and ``options`` (a scalar parameter's values, each a case of its own; the
output's shape is read per value). A reference that returns a tuple is an op of several outputs
(``out0``, ``out1``, ...), each compared and each one's gradient path checked.

``vary`` says which dims cases may change: ``{"x": ("M", "N"), "w": (None, "N")}`` names each
tensor's dims, one name per axis; a name shared between axes ties them (always the same size),
``None`` keeps that axis at the example's size, and a tensor left out keeps all its dims. With
``vary="auto"`` the dims are found by trying the reference: each axis alone, then tied with
one axis of the same size in another input, then with all of them, at the example's size + 1
and half of it; an axis the reference accepts at both varies. The default varies nothing: every
case has the example's shapes (and every dtype, layout, value kind and seed).

The cases, the float64 oracle and the error model are those of every declared op
(harness.ops.derive.DeclaredOp), with what a torch function does not say filled in:
- the terms the formula sums or cancels (``OpDecl.terms``): the reference (or ``magnitude``, a
  function of the same arguments) on the inputs' absolute values, at least |result|: for a
  sum or a product of matrices that is sum |x| and |a| @ |b|, the size an fp32 accumulation
  rounds;
- the longest sum (``OpDecl.reduces``): the largest dim unless ``reduces`` names the dims;
  ``reduces=()`` for an elementwise op;
- value kinds: the row kinds every op gets (values.ROW_KINDS); where the reference is invariant
  to shifting a float input's rows (softmax, log-softmax), also the logit kinds and
  ``shift_by_max`` for that input; where it is invariant to shifting and scaling them, or to an
  offset constant over any axis or trailing axes (a normalisation: a group norm of an NCHW tensor
  cancels an offset per sample), the normalisation kinds, and the terms grow to what cancelling the rows'
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
from harness.registry.declare import VALUE_SOURCES, Index, OpDecl, Scalar, Tensor
from harness.errors import UsageError
from harness.ops import beyond, row_kinds, strategies, values
from harness.ops.derive import DeclaredOp, unique

AUTO = "auto"
TRIAL_SEED = 1234


class ReferenceOp(DeclaredOp):
    """A DeclaredOp whose dims not varied stay at the example's size, whose first floor shape is
    the example's, and whose output shape is read from the reference (per value of its options:
    reduction='none' keeps the rows that 'mean' sums)."""

    def __init__(self, decl: OpDecl, *, example: dict[str, int], fixed: tuple[str, ...], varying: tuple[str, ...],
                 out_names: Callable[[dict[str, Any]], tuple[tuple[str | None, ...], ...]],
                 shape_of: Callable[[dict[str, int], dict[str, Any]], tuple[tuple[int, ...], ...]],
                 example_scalars: dict[str, Any] | None = None, declared_at: str = "") -> None:
        super().__init__(decl, declared_at=declared_at)
        self.example, self.fixed, self.varying = dict(example), fixed, varying
        self.out_names, self.shape_of = out_names, shape_of
        self.example_scalars = dict(example_scalars or {})
        self._shapes: dict[tuple, tuple[int, ...]] = {}
        self._summed: dict[tuple, int] = {}
        self.dtypes: tuple[torch.dtype, ...] = strategies.DTYPES  # the dtypes of its cases (from_reference's dtypes)
        self.lower: dict[str, int] = {}  # the smallest size the reference accepts, per varying dim (domain.lower_bounds)
        self.function: Callable | None = None  # the reference as given (in_dtype casts it)
        # per output, its dtype where the reference returns integers or bools (compared exactly), else None
        self.out_dtypes: tuple[torch.dtype | None, ...] = ()
        # on a GPU, the dims of one case at the problem's real sizes where they fit
        # (harness.reference.sizing.real_dims: KernelBench's example scaled for every other case)
        self.real: dict[str, int] | None = None
        self._cast: dict[tuple, Callable] = {}

    def oracle(self, inputs) -> dict[str, torch.Tensor]:
        """The float64 oracle, with NaN also accepted where it is +-inf and the reference run in
        the case's dtype gives NaN (harness.compare.nonfinite.own_nans)."""
        from harness.compare import nonfinite

        expected = super().oracle(inputs)
        names = [self.oracle_forward_name(inputs), *self.output_checks[1:]]
        infinite = any(isinstance(a, torch.Tensor) and a.is_floating_point() and not bool(torch.isfinite(a).all())
                       for a in inputs.args)
        if infinite or any(bool(torch.isinf(expected[n]).any()) for n in names
                           if isinstance(expected.get(n), torch.Tensor)):
            nonfinite.own_nans(expected, names, self.in_dtype(inputs), self.reached(inputs) if infinite else None)
        return expected

    def reached(self, inputs) -> tuple[torch.Tensor | None, ...]:
        """Per output, the elements a non-finite input reaches: NaN where the float64 reference
        is run with those inputs' non-finite entries as NaN (a ReLU that turns -inf into 0 keeps
        the NaN); () where it cannot run so."""
        args = [torch.where(torch.isfinite(a), a.detach(), torch.full_like(a.detach(), float("nan"))).to(torch.float64)
                if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in inputs.args]
        try:
            with torch.no_grad():
                out = self.decl.reference(*args)
        except Exception:  # noqa: BLE001 - none accepted beyond the oracle's own infinities
            return ()
        return tuple(torch.isnan(o) if isinstance(o, torch.Tensor) else None for o in _outs(out))

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
        """The floor's cases, then one per varying dim beyond the example's size (harness.ops.beyond),
        in the op's dtypes."""
        cases = [c for c in super().floor_cases(backend=backend) + beyond.cases(self, backend)
                 if c.get("dtype") in self.dtype_names()]
        return unique(cases + self.option_cases(cases) + self.real_cases(backend))

    def real_cases(self, backend: str) -> list:
        """On a GPU, one case at the real sizes (``real``): the op's first dtype and value kind,
        contiguous, the example's scalars."""
        from vocabulary import Backend

        if backend != Backend.CUDA or not self.real:
            return []
        scalars = {s.name: self.example_scalars.get(s.name, s.values[0]) for s in self.scalars}
        return [self.case(dict(self.real), self.dtypes[0], "contiguous", self.decl.value_kinds[0], scalars, "none")]

    def option_cases(self, cases: list) -> list:
        """Per dtype, each value of each option (a Scalar of several values: reduction='none',
        'mean', 'sum') that no case of that dtype has, on that dtype's first case: every mode is
        a case of its own in every dtype, not by the picks' luck."""
        out = []
        for s in (s for s in self.scalars if len(s.values) > 1):
            for dtype in self.dtype_names():
                have = [c for c in cases + out if c.get("dtype") == dtype]
                for v in (v for v in s.values if all(c.get(s.name) != s.to_case(v) for c in have)):
                    c = have[0]
                    scalars = {t.name: t.from_case(c.get(t.name)) for t in self.scalars}
                    scalars[s.name] = v
                    out.append(self.case({d: c[d] for d in self.dims}, strategies.dtype_from_name(dtype),
                                         c.get("layout"), c.get("values"), scalars, c.get("ignored")))
        return out

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

    def forward_metas(self, inputs) -> list:
        """Each output's shape and dtype: the case's float dtype, or the reference's own integer
        or bool dtype (argmax's int64)."""
        return [self._own_dtype(j, m) for j, m in enumerate(super().forward_metas(inputs))]

    def forward_meta(self, inputs):
        return self._own_dtype(0, super().forward_meta(inputs))

    def _own_dtype(self, j: int, meta):
        from harness.registry.opspec import Meta

        dtype = self.out_dtypes[j] if j < len(self.out_dtypes) else None
        return meta if dtype is None else Meta(meta.shape, dtype)

    def outputs_dims(self, sizes: dict[str, int], scalars: dict[str, Any] | None = None) -> list[list[tuple[str | None, int]]]:
        scalars = dict(self.example_scalars, **(scalars or {}))
        key = (tuple(sizes[d] for d in self.dims), tuple(scalars.items()))
        if key not in self._shapes:
            try:
                self._shapes[key] = self.shape_of(sizes, scalars)
            except Exception:  # noqa: BLE001 - outside the domain: the case is not run (outside_domain says why),
                # its upstream gradient of the example's output shape is never used
                self._shapes[key] = self.shape_of(self.example, scalars)
        return [list(zip(names, shape)) for names, shape in zip(self.out_names(scalars), self._shapes[key])]

    def output_dims(self, sizes: dict[str, int], scalars: dict[str, Any] | None = None) -> list[tuple[str | None, int]]:
        return self.outputs_dims(sizes, scalars)[0]


def from_reference(fn: Callable, example_args, vary: dict | str | None = None, name: str | None = None, *,
                   differentiable: bool = True, reduces: tuple[str, ...] | None = None,
                   value_kinds: tuple[str, ...] | None = None, magnitude: Callable | None = None,
                   register: bool = True, doc: str = "", dtypes: tuple[torch.dtype, ...] | None = None,
                   no_grad: tuple[str, ...] = (), input_kinds: dict[str, Any] | None = None,
                   ignore_index: str | dict[str, str] | None = None,
                   options: dict[str, tuple] | None = None) -> ReferenceOp:
    """Declare (and register) the op that ``fn`` computes, inferred from ``example_args``; the module
    docstring says how. ``differentiable=False`` checks the forward only; ``dtypes`` (default: fp32,
    fp16 and bf16) the dtypes of its cases. ``no_grad`` names float inputs that get no gradient (a
    target distribution, a mask); ``input_kinds`` gives an input its own value kinds (a tuple of
    kind names, such as row_kinds.PROBABILITIES) or source ("gain", "normal", "mask");
    ``ignore_index`` names the scalar parameter whose value an index input's entries may take
    (``{"target": "ignore_index"}`` where there are several index inputs); ``options`` gives a
    scalar parameter several values, each a case of its own (``{"reduction": ("none", "mean")}``)."""
    args = tuple(example_args)
    names = _names(fn, len(args))
    name = name or getattr(fn, "__name__", None)
    if not (isinstance(name, str) and name.isidentifier()):
        raise RegistryError(f"from_reference: name={name!r}; give the op a name that is an identifier")
    kinds = [_kind(n, a) for n, a in zip(names, args)]
    tensors = {n: a for n, a, k in zip(names, args, kinds) if k != "scalar"}
    if not any(k == "float" for k in kinds):
        raise RegistryError(f"from_reference {name!r}: no float tensor among the example arguments")
    no_grad = _names_of(name, "no_grad", no_grad, [n for n, k in zip(names, kinds) if k == "float"])
    sources = _input_kinds(name, input_kinds or {}, [n for n, k in zip(names, kinds) if k == "float"])
    ignores = _ignores(name, ignore_index, names, kinds, args)
    options = _options(name, options or {}, names, kinds, args)
    trial = _Trial(fn, names, args, kinds, sources=sources, ignores={i: args[names.index(s)] for i, s in ignores.items()})
    base = trial.run({})
    out_dtypes = trial.out_dtypes
    if all(d is not None for d in out_dtypes):  # indices only: nothing to differentiate
        differentiable = False
    dims, varying = _auto_dims(trial, tensors) if vary == AUTO else _named_dims(vary or {}, tensors)
    example = {d: int(tensors[n].shape[a]) for (n, a), d in dims.items()}
    fixed = tuple(d for d in dict.fromkeys(dims.values()) if d not in varying)
    example_scalars = {n: a for n, a, k in zip(names, args, kinds) if k == "scalar"}
    out_names = _OutputNames(trial, dims, varying, example, example_scalars)
    for combo in _combinations(options):  # every mode's output read once now: a mode the reference refuses fails here
        out_names(combo)
    outs = _outs(base)
    inputs = []
    for n, a, k in zip(names, args, kinds):
        if k == "scalar":
            inputs.append(Scalar(n, tuple(options.get(n, (a,)))))
            continue
        shape = tuple(dims[(n, i)] for i in range(a.dim()))
        if k == "bool":
            inputs.append(Tensor(n, shape, values="bool", differentiable=False))
            continue
        if k == "float":
            source = sources.get(n, ())
            own = dict(values=source) if isinstance(source, str) else dict(kinds=source)
            inputs.append(Tensor(n, shape, differentiable=differentiable and n not in no_grad, **own))
        else:
            inputs.append(Index(n, shape, high=_high(n, a, dims, tensors, trial.ignores.get(n)), ignore=ignores.get(n)))
    own_kinds = tuple(dict.fromkeys(k for v in sources.values() if not isinstance(v, str) for k in v))
    shift, norm = _invariances(trial, names, kinds, base, skip=set(sources)) \
        if value_kinds is None and len(outs) == 1 and out_dtypes == (None,) else ((), ())
    kinds_ = value_kinds or (values.ROW_KINDS + (row_kinds.LOGITS if shift else ())
                             + (row_kinds.NORMALISATION if norm else ())
                             + (("ties",) if any(d is not None for d in out_dtypes) else ()))  # argmax's tie-break
    if all(n in sources for n, k in zip(names, kinds) if k == "float") and value_kinds is None:
        kinds_ = own_kinds or kinds_  # every float input has its own values: the op's kinds are theirs
    else:
        kinds_ = tuple(dict.fromkeys(tuple(kinds_) + own_kinds))
    magnitude = magnitude or fn
    grad_wrt = [p for p, i in enumerate(inputs) if isinstance(i, Tensor) and i.differentiable]
    cancels = [names.index(n) for n in norm]
    decl = OpDecl(
        name=name,
        signature=_signature(inputs, out_names(example_scalars), outs, options),
        inputs=tuple(inputs),
        # the outputs' shapes are read from the reference (ReferenceOp.outputs_dims); several are
        # named out0, out1, ... with the dims that name their axes (_declared_outputs)
        output=_declared_outputs(names, out_names(example_scalars), outs, dims, example),
        reference=trial.call,
        terms=lambda *a: (*_terms(trial, magnitude, a[:-len(outs)], cancels),
                          *_grad_terms(trial, magnitude, a[:-len(outs)], a[-len(outs):], grad_wrt)),
        reduces=tuple(dict.fromkeys(dims.values())) if reduces is None else tuple(reduces),
        shift_by_max=tuple(shift),
        value_kinds=tuple(kinds_),
        doc=doc or f"{name}: declared from a torch reference (harness.ops.reference).",
    )
    caller = inspect.currentframe().f_back
    lower = _lower_bounds(trial, dims, varying, example)
    op = ReferenceOp(decl, example=example, fixed=fixed, varying=varying, out_names=out_names,
                     shape_of=lambda sizes, scalars: tuple(
                         tuple(o.shape) for o in _outs(trial.run(_by_axis(dims, sizes), scalars=scalars))),
                     example_scalars=example_scalars, declared_at=f"{caller.f_code.co_filename}:{caller.f_lineno}")
    op.lower = lower
    op.function = fn
    op.out_dtypes = out_dtypes
    if dtypes is not None:
        bad = [d for d in dtypes if d not in strategies.DTYPES]
        if not dtypes or bad:
            raise RegistryError(f"from_reference {name!r}: dtypes={tuple(dtypes)!r}; choose from {strategies.DTYPES}")
        op.dtypes = tuple(dtypes)
    if register:
        from harness.registry.registry import REGISTRY

        REGISTRY.add_op(op)
    return op


# --- the inputs' roles -----------------------------------------------------------------------

def _names_of(op: str, param: str, given, allowed: list[str]) -> tuple[str, ...]:
    given = (given,) if isinstance(given, str) else tuple(given)
    bad = [n for n in given if n not in allowed]
    if bad:
        raise RegistryError(f"from_reference {op!r}: {param} names {bad}, which are no float tensor inputs; "
                            f"choose from {allowed}")
    return given


def _input_kinds(op: str, given: dict, floats: list[str]) -> dict[str, tuple[str, ...] | str]:
    """Per float input named in ``input_kinds``: its own value kinds (a tuple) or source (a str)."""
    if not isinstance(given, dict):
        raise RegistryError(f"from_reference {op!r}: input_kinds={given!r}; pass a dict such as "
                            "{'p': row_kinds.PROBABILITIES}")
    _names_of(op, "input_kinds", tuple(given), floats)
    out: dict[str, tuple[str, ...] | str] = {}
    for n, v in given.items():
        if isinstance(v, str) and v in VALUE_SOURCES and v != "kind":
            out[n] = v
            continue
        v = (v,) if isinstance(v, str) else tuple(v)
        bad = [k for k in v if k not in row_kinds.KINDS]
        if not v or bad:
            raise RegistryError(f"from_reference {op!r}: input_kinds[{n!r}]={v!r}; give value kinds from "
                                f"{row_kinds.KINDS} or one of {VALUE_SOURCES[1:]}")
        out[n] = v
    return out


def _ignores(op: str, given, names: list[str], kinds: list[str], args) -> dict[str, str]:
    """{index input: the scalar parameter holding the value its ignored entries take}."""
    if given is None:
        return {}
    indices = [n for n, k in zip(names, kinds) if k == "index"]
    scalars = [n for n, k, a in zip(names, kinds, args) if k == "scalar" and isinstance(a, int) and not isinstance(a, bool)]
    if isinstance(given, str):
        if len(indices) != 1:
            raise RegistryError(f"from_reference {op!r}: ignore_index={given!r} needs exactly one index input, found "
                                f"{indices}; pass {{'<index input>': {given!r}}}")
        given = {indices[0]: given}
    if not isinstance(given, dict):
        raise RegistryError(f"from_reference {op!r}: ignore_index={given!r}; name the scalar parameter that holds it")
    for i, s in given.items():
        if i not in indices or s not in scalars:
            raise RegistryError(f"from_reference {op!r}: ignore_index={given!r}: {i!r} must be an int64 index input "
                                f"({indices}) and {s!r} an int parameter of the reference ({scalars})")
    return dict(given)


def _options(op: str, given: dict, names: list[str], kinds: list[str], args) -> dict[str, tuple]:
    """{scalar parameter: its values}, each of one kind (numbers, mode names or bools: declare.Scalar)."""
    if not isinstance(given, dict):
        raise RegistryError(f"from_reference {op!r}: options={given!r}; pass a dict such as "
                            "{'reduction': ('none', 'mean', 'sum')}")
    scalars = [n for n, k in zip(names, kinds) if k == "scalar"]
    out = {}
    for n, v in given.items():
        v = tuple(v) if isinstance(v, (tuple, list)) else (v,)
        if n not in scalars or not v:
            raise RegistryError(f"from_reference {op!r}: options names {n!r}; give values for a scalar parameter "
                                f"({scalars})")
        Scalar(n, v)  # the values' kinds checked as any declared op's are
        out[n] = v
    return out


def _combinations(options: dict[str, tuple]) -> list[dict[str, Any]]:
    combos: list[dict[str, Any]] = [{}]
    for n, vs in options.items():
        combos = [dict(c, **{n: v}) for c in combos for v in vs]
    return combos


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
        if a.dtype == torch.bool and a.dim() > 0:
            return "bool"
        raise RegistryError(f"from_reference: input {name!r} is a {a.dtype} tensor of {a.dim()} dims; only float "
                            "tensors, int64 index tensors, bool masks and numbers are supported")
    if isinstance(a, (bool, int, float)) or (isinstance(a, str) and a.replace("_", "a").isalnum()):
        return "scalar"
    raise RegistryError(f"from_reference: input {name!r} is a {type(a).__name__}; only tensors, numbers, bools and "
                        "mode names are supported")


class _Trial:
    """The reference on inputs of given sizes (seeded random values): the float64 oracle's call,
    and the probe of which sizes it accepts. An input with its own value kinds is drawn in its
    first (probabilities stay probabilities); an index input's ignored value is never drawn."""

    def __init__(self, fn, names, args, kinds, sources=None, ignores=None):
        self.fn, self.names, self.args, self.kinds = fn, names, args, kinds
        self.sources = dict(sources or {})
        self.ignores = dict(ignores or {})
        self.out_dtypes: tuple[torch.dtype | None, ...] = ()  # per output: its integer / bool dtype, or None

    def call(self, *args):
        """The reference, its integer or bool outputs as float64 (the oracle's dtype; the values
        are exact below 2^53): the error model's steps run on it as on any output."""
        out = self.fn(*args)
        if isinstance(out, tuple):
            return tuple(_as_float(o) for o in out)
        return _as_float(out)

    def inputs(self, sizes: dict[tuple[str, int], int], transform=None, scalars=None) -> list[Any]:
        gen = torch.Generator().manual_seed(TRIAL_SEED)
        out = []
        for n, a, k in zip(self.names, self.args, self.kinds):
            if k == "scalar":
                out.append((scalars or {}).get(n, a))
                continue
            shape = tuple(sizes.get((n, i), s) for i, s in enumerate(a.shape))
            if k == "float":
                t = self._float(n, shape, gen)
                out.append(transform(n, t) if transform else t)
            elif k == "bool":
                out.append(torch.rand(shape, generator=gen, dtype=torch.float64) < 0.5)
            else:
                kept = a[a != self.ignores[n]] if n in self.ignores else a
                high = int(kept.max()) + 1 if kept.numel() else 1
                # within the dim that bounds it (another input's axis of the example's size max + 1),
                # at that dim's size in this trial: targets stay classes when the class dim shrinks
                bounds = [sizes[(m, i)] for m, b in zip(self.names, self.args) if m != n and isinstance(b, torch.Tensor)
                          for i, s in enumerate(b.shape) if s == high and (m, i) in sizes]
                high = min([high, *bounds])
                out.append(torch.randint(0, max(1, high), shape, generator=gen, dtype=a.dtype))
        return out

    def _float(self, n: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
        source = self.sources.get(n)
        if source is None or source == "normal":
            return torch.randn(shape, generator=gen, dtype=torch.float64)
        if source == "gain":
            return values.gains(max(1, torch.Size(shape).numel()), gen)[:torch.Size(shape).numel()].reshape(shape)
        if source == "mask":
            return values.additive_mask(shape, torch.float64, gen)
        return row_kinds.draw(source[0], shape, torch.float64, gen)

    def run(self, sizes: dict[tuple[str, int], int], transform=None, scalars=None) -> torch.Tensor:
        with torch.no_grad():
            out = self.fn(*self.inputs(sizes, transform, scalars))
        outs = out if isinstance(out, tuple) and out else (out,)
        bad = [o for o in outs if not (isinstance(o, torch.Tensor) and (o.is_floating_point() or _integer(o)))]
        if bad:
            raise RegistryError(f"from_reference: the reference must return a float, integer or bool tensor or a "
                                f"tuple of them, got {type(bad[0]).__name__}"
                                + (f" of {bad[0].dtype}" if isinstance(bad[0], torch.Tensor) else ""))
        if not self.out_dtypes:  # the example's run: which outputs are indices
            self.out_dtypes = tuple(o.dtype if _integer(o) else None for o in outs)
        return tuple(_as_float(o) for o in out) if isinstance(out, tuple) else _as_float(out)

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


def _integer(t) -> bool:
    """Whether ``t`` is an integer or bool tensor (an output compared exactly)."""
    return isinstance(t, torch.Tensor) and not t.is_floating_point() and not t.is_complex()


def _as_float(t):
    return t.to(torch.float64) if _integer(t) else t


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


class _OutputNames:
    """Per output axis, the varying dim it follows (None: it stays as it is), for the options'
    values of a call: read from the reference once per mode (reduction='none' keeps a row dim
    that 'mean' sums away)."""

    def __init__(self, trial: _Trial, dims, varying, example, example_scalars) -> None:
        self.trial, self.dims, self.varying, self.example = trial, dims, varying, example
        self.example_scalars = example_scalars
        self._names: dict[tuple, tuple[tuple[str | None, ...], ...]] = {}

    def __call__(self, scalars: dict[str, Any]) -> tuple[tuple[str | None, ...], ...]:
        scalars = dict(self.example_scalars, **scalars)
        key = tuple(scalars.items())
        if key not in self._names:
            self._names[key] = _output_names(self.trial, self.dims, self.varying, self.example, scalars)
        return self._names[key]


def _output_names(trial: _Trial, dims, varying, example, scalars) -> tuple[tuple[str | None, ...], ...]:
    """Per output, per axis, the varying dim it follows (None: it stays as it is)."""
    mode = "".join(f", {n}={v!r}" for n, v in scalars.items() if v != trial.args[trial.names.index(n)])
    try:
        base = trial.run({}, scalars=scalars)
    except RegistryError:
        raise
    except Exception as exc:  # a mode the reference refuses (options)
        raise RegistryError(f"from_reference: the reference fails at the example's sizes{mode}: "
                            f"{type(exc).__name__}: {exc}") from None
    base = _outs(base)
    names: list[list[str | None]] = [[None] * b.dim() for b in base]
    for d in varying:
        s = example[d] + 1
        try:
            out = trial.run({u: s for u, dd in dims.items() if dd == d}, scalars=scalars)
        except Exception as exc:
            raise RegistryError(f"from_reference: the reference fails when {d} changes from {example[d]} to {s}{mode}: "
                                f"{type(exc).__name__}: {exc}") from None
        out = _outs(out)
        if len(out) != len(base) or any(o.dim() != b.dim() for o, b in zip(out, base)):
            raise RegistryError(f"from_reference: the output's rank changes with {d}; vary fewer dims")
        for j, (o, b) in enumerate(zip(out, base)):
            for k, (x, y) in enumerate(zip(b.shape, o.shape)):
                if x != y and names[j][k] is None:
                    names[j][k] = d
    return tuple(tuple(n) for n in names)


def _outs(value) -> tuple[torch.Tensor, ...]:
    """The reference's output(s) as a tuple."""
    return tuple(value) if isinstance(value, tuple) else (value,)


def _declared_outputs(names: list[str], out_names, outs, dims, example) -> Any:
    """The OpDecl's ``output``: () for one output (its shape read from the reference), else
    {out0: dims, out1: dims, ...}, each axis named by the dim it follows or a fixed dim of its
    size; an output with an axis no dim names is declared without dims (its shape still read)."""
    if len(outs) == 1:
        return ()
    clash = [f"out{j}" for j in range(len(outs)) if f"out{j}" in names]
    if clash:
        raise RegistryError(f"from_reference: the outputs are named out0, out1, ...; rename the parameter(s) {clash}")
    fixed = {}
    for d in dict.fromkeys(dims.values()):
        fixed.setdefault(example[d], d)
    out = {}
    for j, (axes, o) in enumerate(zip(out_names, outs)):
        named = tuple(a if a is not None else fixed.get(int(n)) for a, n in zip(axes, o.shape))
        out[f"out{j}"] = named if all(named) else ()
    return out


def _high(name: str, a: torch.Tensor, dims, tensors, ignore: int | None = None) -> str:
    a = a[a != ignore] if ignore is not None else a  # the ignored value is no class
    top = int(a.max()) if a.numel() else 0
    bounds = sorted({(int(tensors[n].shape[x]) != top + 1, int(tensors[n].shape[x]), d)
                     for (n, x), d in dims.items() if n != name and int(tensors[n].shape[x]) > top})
    if not bounds or int(a.min()) < 0:
        raise RegistryError(f"from_reference: the values of index input {name!r} (0..{top}) are bounded by no dim of "
                            "another input; declare the op with harness.OpDecl and Index(..., high=DIM)")
    return bounds[0][2]


def _offset_shapes(shape: torch.Size) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The ways an offset can be constant over some axes of a tensor of ``shape``, each as (the
    axes it is constant over, the offset's shape): over one axis (a softmax's or a layer norm's
    dim, the last one first), then over every axis from k on (a layer norm over several trailing
    dims, an instance norm over the spatial ones, a group norm over channel groups and space: an
    offset per sample is constant within every group), then over all of them."""
    n = len(shape)
    ways = [(d,) for d in range(n - 1, -1, -1)] + [tuple(range(k, n)) for k in range(n - 2, -1, -1)]
    return [(axes, tuple(1 if a in axes else s for a, s in enumerate(shape))) for axes in dict.fromkeys(ways)]


def _invariances(trial: _Trial, names, kinds, base, skip=()) -> tuple[list[str], list[str]]:
    """Float inputs whose rows (last dim) the reference is invariant to shifting (softmax:
    shift_by_max), and those it is invariant to shifting and scaling over any axis or trailing
    axes (a normalisation: a layer norm; a group or instance norm of an NCHW tensor); those in
    ``skip`` (values of their own) not tried. Found by probing: the reference run with the input
    moved by a random offset (and scale) constant over the axes tried, its output unchanged. A
    softmax over an axis that is not the last (the channels) is shift-invariant only, there: it
    is neither (shift_by_max's rounding is taken on x - the last dim's max)."""
    shift, norm = [], []
    for n, k in zip(names, kinds):
        if k != "float" or n in skip:
            continue
        t0 = trial.args[names.index(n)]
        for axes, shape in _offset_shapes(t0.shape):

            def moved(scale, shape=shape):
                return lambda m, t: (t * scale + 3.0 + torch.rand(shape, dtype=t.dtype, device=t.device)) \
                    if m == n and tuple(t.shape) == tuple(t0.shape) else t

            try:
                shifted = trial.run({}, moved(1.0))
            except Exception:  # noqa: BLE001 - a probe: not invariant
                continue
            # a probe of the float64 reference, not a tolerance on a kernel: invariant means unchanged up to
            # float64 roundings, so only an exact normalisation or shift is recognised
            if not (shifted.shape == base.shape and torch.allclose(shifted, base, rtol=1e-9, atol=1e-12)):
                continue
            try:
                scaled = trial.run({}, moved(2.5))
            except Exception:  # noqa: BLE001
                scaled = None
            if scaled is not None and scaled.shape == base.shape and torch.allclose(scaled, base, rtol=1e-4, atol=1e-6):
                norm.append(n)  # eps breaks exactness; the terms it cancels are read by _cancelled, any axes
            elif axes == (t0.dim() - 1,):
                shift.append(n)  # a kernel subtracts the last dim's max first (compare.rounding.row_max_center)
            break
    return shift, norm


def _terms(trial: _Trial, magnitude: Callable, args, cancels: list[int] = ()) -> list[torch.Tensor]:
    """Per output, the larger of |result| and |magnitude| on the inputs' absolute values."""
    with torch.no_grad():
        results = [r.abs() for r in _outs(trial.call(*args))]
        absolute = [a.abs() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        try:
            sizes = [m.abs() for m in _outs(magnitude(*absolute))]
        except Exception:  # noqa: BLE001 - the magnitude is a bound only; |result| stands in
            sizes = results
        out = []
        for result, sized in zip(results, sizes if len(sizes) == len(results) else results):
            if sized.shape != result.shape:
                sized = result
            out.append(torch.fmax(result, torch.where(torch.isfinite(sized), sized, torch.zeros_like(sized))))
        if cancels:  # a normalisation: one output (from_reference)
            out[0] = torch.fmax(out[0], _cancelled(trial, args, cancels, results[0]))
        if len(out) == 1:  # the terms its intermediate steps cancel (harness.reference.intermediates)
            steps = intermediates.terms(trial.call, args, rounding.unit_roundoff(torch.float32))
            if steps is not None and steps.shape == out[0].shape:
                out[0] = torch.fmax(out[0], steps.to(out[0].device, out[0].dtype))
    return out


def _grad_terms(trial: _Trial, magnitude: Callable, args, upstream: tuple[torch.Tensor, ...], grad_wrt: list[int]):
    """Per gradient, the size of the terms its formula sums or cancels: the largest of |the
    gradient|, the gradient for |upstream| (the upstream's signs cancel a broadcast input's sum) and the
    gradient of ``magnitude`` on the inputs' absolute values for |upstream|, as for the
    forward's terms. A derivative evaluated where it is tiny cancels terms of the size it has
    where the inputs are positive (gelu's 1 + tanh(u) near u = -4: each term about 1, their sum
    1e-3), and fp32 rounds those terms, not the tiny result. At least the terms the forward's and
    the backward's intermediate steps cancel (harness.reference.intermediates.gradient_terms: a
    sum over classes of dlogit_k W_k where two classes' weights are near or exactly equal)."""
    if not grad_wrt:
        return ()
    out = [None] * len(grad_wrt)
    unsigned = tuple(u.abs() for u in upstream)
    for fn, absolute, up in ((trial.call, False, tuple(upstream)), (trial.call, False, unsigned),
                             (magnitude, True, unsigned)):
        leaves = [a.detach().abs() if absolute and isinstance(a, torch.Tensor) and a.is_floating_point()
                  else a.detach() if isinstance(a, torch.Tensor) else a for a in args]
        for p in grad_wrt:
            leaves[p] = leaves[p].clone().requires_grad_(True)
        try:
            with torch.enable_grad():
                res = _outs(fn(*leaves))
                if len(res) != len(up) or any(r.shape != u.shape for r, u in zip(res, up)):
                    continue
                used = [(r, u) for r, u in zip(res, up) if r.requires_grad]
                grads = torch.autograd.grad([r for r, _ in used], [leaves[p] for p in grad_wrt],
                                            grad_outputs=[u for _, u in used], allow_unused=True)
        except Exception:  # noqa: BLE001 - a bound only; the default terms stand in
            continue
        for j, (g, p) in enumerate(zip(grads, grad_wrt)):
            if g is None or g.shape != args[p].shape:
                continue
            g = g.detach().abs()
            g = torch.where(torch.isfinite(g), g, torch.zeros_like(g))
            out[j] = g if out[j] is None else torch.fmax(out[j], g)
    # the terms the forward's and the backward's intermediate steps cancel (harness.reference.intermediates)
    u = rounding.unit_roundoff(torch.float32)
    steps = intermediates.gradient_terms(trial.call, args, grad_wrt, tuple(upstream), u)
    for j, s in enumerate(steps or ()):
        if s is not None and out[j] is not None and s.shape == out[j].shape:
            out[j] = torch.fmax(out[j], s.to(out[j].device, out[j].dtype))
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


def _signature(inputs, out_names, outs, options=None) -> str:
    options = options or {}
    parts = [f"{i.name}[{', '.join(i.shape)}]" if not isinstance(i, Scalar)
             else f"{i.name} in {tuple(i.values)!r}" if i.name in options else f"{i.name}={i.values[0]!r}"
             for i in inputs]
    shapes = [", ".join(d if d is not None else str(s) for d, s in zip(names, o.shape)) for names, o in zip(out_names, outs)]
    if len(outs) == 1:
        return f"f({', '.join(parts)}) -> y[{shapes[0]}]"
    return f"f({', '.join(parts)}) -> ({', '.join(f'out{j}[{s}]' for j, s in enumerate(shapes))})"


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
