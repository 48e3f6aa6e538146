"""Declaring an op in one short file: its inputs, its float64 reference, its value kinds.

An :class:`OpDecl` says *what* the op is; harness.ops.derive turns it into a full op spec (floor
cases, hypothesis strategy, layouts, inputs, gradients, tolerances, case ids). Example::

    register_op(OpDecl(
        name="softmax",
        signature="f(x[M, N]) -> y[M, N]",
        inputs=(Tensor("x", "M, N"),),
        output="M, N",
        reference=lambda x: torch.softmax(x, dim=-1),
        value_kinds=("normal", "large_logits", "masked_rows", "ties"),
    ))

Input roles:
- :class:`Tensor`: a float tensor in the case's dtype. ``values="kind"`` follows the case's
  value kind (harness.ops.row_kinds), or with ``kinds`` the input's own kinds (probabilities for a
  distribution: the case's kind where it is one of them, else one of them by the case's seed); ``"gain"`` is a weight around 1 with random signs and
  sizes (never all ones); ``"normal"`` is N(0, 1) (e.g. a bias); ``"mask"`` an additive mask
  of 0 (kept) and -inf or the dtype's most negative value (masked), at least one entry kept per
  row (harness.ops.values.additive_mask); ``"bool"`` a bool mask (a torch.bool tensor whatever the
  case's dtype, true with a density the case's seed picks, all false and all true among them:
  harness.ops.values.bool_mask), never differentiable.
- :class:`Index`: an int64 tensor of class ids in ``[0, high)``, ``high`` a symbolic dim. With
  ``ignore`` naming a :class:`Scalar`, rows may carry that value instead (none, some or all
  rows ignored: the case parameter ``ignored``); the forward check of an all-ignored case is
  recorded as ``all_ignored``.
- :class:`Scalar`: a plain Python parameter; ``values`` are the ones cases draw: ints, floats,
  names of a mode (``Scalar("activation", ("none", "relu"))``: letters, digits and ``_``), or bools
  only (a flag such as ``causal``), which a case id writes ``true`` / ``false`` and the kernel
  receives as ``True`` / ``False``.

A dim may be computed from the others instead of drawn (``derived``): a head dim that is twice
the cos table's width, ``derived={"D": lambda s: 2 * s["R"]}``. The floor and the strategy draw
the other dims and every case carries the computed one.

Several outputs: ``output`` may map each output's name to its shape, in the order the kernel
returns them (``output={"y": "M, N", "h": "M, N"}``: the kernel returns the tuple ``(y, h)``).
The first output is checked as ``forward_check``, each other one as ``forward_<name>``, each
against its own float64 value with its own allowance and its own shape and dtype. The backward
gets one upstream gradient per output (each drawn and laid out like a single output's);
``reference`` returns the outputs as a tuple, and ``backward`` and ``terms`` take the upstream
gradients as trailing arguments, one per output in order (``terms(*args, dy, dh)``), ``terms``
returning one entry per output, then one per gradient.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from harness.errors import RegistryError

VALUE_SOURCES = ("kind", "gain", "normal", "mask", "bool")


def _dims(shape: str | tuple[str, ...]) -> tuple[str, ...]:
    """``"M, N"`` or ``("M", "N")`` -> ``("M", "N")``; ``""`` or ``()`` is a scalar."""
    dims = tuple(d.strip() for d in shape.split(",") if d.strip()) if isinstance(shape, str) else tuple(shape)
    for d in dims:
        if not (isinstance(d, str) and d.isidentifier()):
            raise RegistryError(f"symbolic dimension {d!r} must be a name such as M or N")
    return dims


def _outputs(op: str, output: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``output`` given as {name: shape} (several outputs) -> ((name, dims), ...); () otherwise."""
    if not isinstance(output, dict):
        return ()
    if len(output) < 2:
        raise RegistryError(f"op {op!r}: output={output!r}: a dict names two or more outputs; give a single "
                            "output as its shape, output=\"M, N\"")
    bad = [n for n in output if not (isinstance(n, str) and n.isidentifier())]
    if bad:
        raise RegistryError(f"op {op!r}: output names {bad} must be identifiers (each output's check is "
                            "forward_<name>)")
    return tuple((n, _dims(shape)) for n, shape in output.items())


@dataclasses.dataclass(frozen=True)
class Tensor:
    name: str
    shape: str | tuple[str, ...]
    values: str = "kind"
    differentiable: bool = True
    kinds: tuple[str, ...] = ()  # the input's own value kinds (module docstring); () the op's

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _dims(self.shape))
        if self.values not in VALUE_SOURCES:
            raise RegistryError(f"Tensor {self.name!r}: values={self.values!r}; choose from {VALUE_SOURCES}")
        object.__setattr__(self, "kinds", tuple(self.kinds))
        if any(not (isinstance(k, str) and k) for k in self.kinds) or (self.kinds and self.values != "kind"):
            raise RegistryError(f"Tensor {self.name!r}: kinds={self.kinds!r} must be value kind names, with values='kind'")
        if not self.shape:
            raise RegistryError(f"Tensor {self.name!r} needs at least one dimension (a scalar is a Scalar input)")
        if self.values == "bool" and self.differentiable:
            raise RegistryError(f"Tensor {self.name!r}: a bool mask (values='bool') has no gradient; "
                                "pass differentiable=False")

    @property
    def is_float(self) -> bool:
        """Whether the input is a float tensor in the case's dtype (not a bool mask)."""
        return self.values != "bool"


@dataclasses.dataclass(frozen=True)
class Index:
    name: str
    shape: str | tuple[str, ...]
    high: str
    ignore: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _dims(self.shape))
        if not self.high.isidentifier():
            raise RegistryError(f"Index {self.name!r}: high={self.high!r} must name a symbolic dimension")


@dataclasses.dataclass(frozen=True)
class Scalar:
    name: str
    values: tuple[int | float, ...] | tuple[bool, ...]
    positive: bool = False  # a number that must be > 0 in any case, a --case typed by hand too (an eps)

    def __post_init__(self) -> None:
        def kind(v) -> str | None:
            if isinstance(v, bool):
                return "flag"
            if isinstance(v, str):  # a mode's name, as a case id holds it
                return "mode" if v.replace("_", "a").isalnum() else None
            return "number" if isinstance(v, (int, float)) else None

        kinds = {kind(v) for v in self.values}
        if len(kinds) != 1 or None in kinds:
            raise RegistryError(f"Scalar {self.name!r}: values must be a non-empty tuple of ints and floats, of mode "
                                f"names (letters, digits, _), or of bools only, got {self.values!r}")
        if self.positive and (kinds != {"number"} or any(not v > 0 for v in self.values)):
            raise RegistryError(f"Scalar {self.name!r}: positive=True needs numbers > 0, got {self.values!r}")

    @property
    def is_flag(self) -> bool:
        return isinstance(self.values[0], bool)

    def to_case(self, value: Any) -> int | float | str:
        """The value as a case parameter: a bool as ``true`` / ``false`` (case ids hold no bools)."""
        return ("true" if value else "false") if self.is_flag else value

    def from_case(self, value: Any) -> Any:
        """A case parameter back as the kernel's argument (``true`` / ``false`` -> bool)."""
        if not self.is_flag:
            return value
        if value not in ("true", "false"):
            raise RegistryError(f"Scalar {self.name!r} is a flag: its case value must be true or false, got {value!r}")
        return value == "true"


Input = Tensor | Index | Scalar


@dataclasses.dataclass(frozen=True)
class OpDecl:
    """One op. ``reference(*args)`` takes float64 tensors (index tensors as int64, scalars as
    given) in the declared order and returns the float64 output; gradients come from float64
    autograd through it unless ``backward(*args, upstream)`` returns them (one per
    differentiable input, in order). ``terms(*args, upstream)`` may return, per check
    (forward, then each gradient), the size of the terms its formula sums or cancels (None:
    |result| for the forward, the gradient for |upstream| for a gradient: harness.ops.derive),
    for the fp32-arithmetic part of the allowed error; a ``terms`` with a keyword parameter
    ``tiny`` is given the smallest normal of the case's dtype, for the terms of an intermediate
    that a kernel may keep in that dtype (``Contract(precision="input")``): rounding v to a
    dtype is off by up to u (|v| + tiny), since below tiny its spacing no longer shrinks. The allowed error is the
    spread of the reference under the input dtype's rounding of its inputs, plus fp32 roundings
    of the terms, plus the output's rounding (harness.compare.rounding); say in ``doc`` (the
    op module's docstring) what that means for the op."""

    name: str
    signature: str
    inputs: tuple[Input, ...]
    output: str | tuple[str, ...] | dict[str, str | tuple[str, ...]]  # {name: shape} for several outputs
    reference: Callable[..., Any]
    value_kinds: tuple[str, ...]
    forward_check: str = "forward"
    backward: Callable[..., tuple[Any, ...]] | None = None
    terms: Callable[..., tuple[Any, ...]] | None = None
    reduces: str | tuple[str, ...] = ()  # dims the op sums over (the longest sets the fp32 allowance)
    # float inputs whose rows (last dim) the op is invariant to shifting and that a kernel shifts
    # by the row's max first (softmax): their rounding is taken on x - max (compare.rounding)
    shift_by_max: tuple[str, ...] = ()
    doc: str = ""
    # optional overrides: sizes the floor and the strategy favour for a dim, its largest value
    special_sizes: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    max_size: dict[str, int] = dataclasses.field(default_factory=dict)
    # shapes by purpose the floor adds to the derived ones, as given (not fitted to the budget):
    # {dim: size} for every drawn dim; ``floor_shapes_gpu`` on CUDA only (sizes past what the
    # interpreter runs, such as 32769 short rows where a library switches kernels)
    floor_shapes: tuple[dict[str, int], ...] = ()
    floor_shapes_gpu: tuple[dict[str, int], ...] = ()
    # dims computed from the drawn ones, in order: {dim: f(sizes) -> int} (module docstring)
    derived: dict[str, Callable[[dict[str, int]], int]] = dataclasses.field(default_factory=dict)
    # a dim counting rows that callers may give as several leading (batch) dims, x[B, S, N] for
    # x[M, N]: the first dim of the output and of every input that has it (harness.ops.leading)
    leading: str | None = None
    # an intermediate the op's contract lets a kernel keep in the input dtype and compute from (a
    # stored residual stream): ``rounded_terms(*args, *upstreams)`` returns per check (outputs, then
    # gradients; None: nothing) the first-order worst-case change of the result when that
    # intermediate is rounded by a relative 1 per element; the allowance adds it times the input
    # dtype's unit roundoff (harness.ops.derive); like ``terms`` it may take the keyword ``tiny``
    rounded_terms: Callable[..., tuple[Any, ...]] | None = None
    # An op whose cases follow its kernels' tiles and its own inputs rather than the derived floor
    # and draws (attention: heads tied, a KV cache's layouts; fused_linear_cross_entropy: logits
    # drawn through x and weight) replaces those parts, each by a function whose first argument
    # is the op (harness.ops.derive.DeclaredOp, whose ``case``, ``cover``, ``picked`` ... it
    # calls); case ids, oracle, error model and checks stay the derived ones:
    dim_order: tuple[str, ...] = ()  # the dims in a shape's key (its stable picks), where not the inputs' order
    layouts: tuple[str, ...] = ()  # the layouts cases take, where not the derived ones
    floor: Callable[[Any, str], list] | None = None  # (op, backend) -> the floor cases
    pick: Callable[..., Any] | None = None  # (op, shape, dtype, kind, layout) -> the floor case of a shape
    strategy: Callable[[Any, str], Any] | None = None  # (op, backend) -> a hypothesis strategy of cases
    make_inputs: Callable[[Any, Any, str], Any] | None = None  # (op, case, device) -> OpInputs
    validate: Callable[[Any, Any], None] | None = None  # (op, case), before the derived checks: raises UsageError
    # (name, dims) of each output when there are several (``output`` a dict), else ():
    # set from ``output``, whose own value becomes the first output's dims
    outputs: tuple[tuple[str, tuple[str, ...]], ...] = dataclasses.field(default=(), init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "outputs", _outputs(self.name, self.output))
        object.__setattr__(self, "output", self.outputs[0][1] if self.outputs else _dims(self.output))
        object.__setattr__(self, "reduces", _dims(self.reduces))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        if not (isinstance(self.name, str) and self.name.isidentifier()):
            raise RegistryError(f"OpDecl name must be an identifier, got {self.name!r}")
        names = [i.name for i in self.inputs]
        if len(set(names)) != len(names):
            raise RegistryError(f"op {self.name!r}: input names repeat: {names}")
        if not any(isinstance(i, Tensor) and i.is_float for i in self.inputs):
            raise RegistryError(f"op {self.name!r} needs at least one float Tensor input")
        if not callable(self.reference):
            raise RegistryError(f"op {self.name!r}: reference must be callable")
        if self.rounded_terms is not None and not callable(self.rounded_terms):
            raise RegistryError(f"op {self.name!r}: rounded_terms must be callable or None")
        for hook in ("floor", "pick", "strategy", "make_inputs", "validate"):
            if getattr(self, hook) is not None and not callable(getattr(self, hook)):
                raise RegistryError(f"op {self.name!r}: {hook} must be a function of the op or None, "
                                    f"got {type(getattr(self, hook)).__name__}")
        scalars = {i.name for i in self.inputs if isinstance(i, Scalar)}
        for i in self.inputs:
            if isinstance(i, Index) and i.ignore is not None and i.ignore not in scalars:
                raise RegistryError(f"op {self.name!r}: Index {i.name!r} ignores {i.ignore!r}, which is no Scalar input")
        floats = {i.name for i in self.inputs if isinstance(i, Tensor) and i.is_float}
        if not isinstance(self.shift_by_max, tuple) or any(n not in floats for n in self.shift_by_max):
            raise RegistryError(f"op {self.name!r}: shift_by_max={self.shift_by_max!r} must be a tuple of float Tensor "
                                f"input names, from {sorted(floats)}")
        dims = {d for i in self.inputs if not isinstance(i, Scalar) for d in i.shape}
        clash = [n for n, _ in self.outputs if n in names]
        if clash:
            raise RegistryError(f"op {self.name!r}: output name(s) {clash} repeat input names {names}")
        out_dims = [d for _, shape in self.outputs for d in shape] if self.outputs else list(self.output)
        missing = [d for d in out_dims + list(self.reduces) if d not in dims] + [
            i.high for i in self.inputs if isinstance(i, Index) and i.high not in dims
        ]
        if missing:
            raise RegistryError(f"op {self.name!r}: dimension(s) {missing} appear in no input's shape")
        if not isinstance(self.derived, dict) or any(d not in dims or not callable(f) for d, f in self.derived.items()):
            raise RegistryError(f"op {self.name!r}: derived={self.derived!r} must map dims of the inputs "
                                f"({sorted(dims)}) to functions of the other dims' sizes")
        if self.leading is not None and (self.leading not in dims or self.leading in self.derived or any(
                self.leading in i.shape[1:] for i in self.inputs if not isinstance(i, Scalar))
                or any(shape[:1] != (self.leading,) for shape in self.output_shapes)):
            raise RegistryError(f"op {self.name!r}: leading={self.leading!r} must name a drawn dim that comes first in "
                                "each output's shape and in every input's shape that has it")
        if self.dim_order and sorted(self.dim_order) != sorted(dims):
            raise RegistryError(f"op {self.name!r}: dim_order={self.dim_order!r} must name each dim of the inputs "
                                f"({sorted(dims)}) once")
        drawn = dims - set(self.derived)
        for shape in self.floor_shapes + self.floor_shapes_gpu:
            if not isinstance(shape, dict) or set(shape) != drawn or any(
                    isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in shape.values()):
                raise RegistryError(f"op {self.name!r}: floor shape {shape!r} must give each drawn dim "
                                    f"({sorted(drawn)}) a whole size >= 1")
        if dims and set(self.derived) >= dims:
            raise RegistryError(f"op {self.name!r}: every dim is derived; at least one must be drawn")

    @property
    def output_shapes(self) -> tuple[tuple[str, ...], ...]:
        """Each output's dims, in the order the kernel returns them (one for a single output)."""
        return tuple(shape for _, shape in self.outputs) if self.outputs else (self.output,)

    @property
    def output_checks(self) -> tuple[str, ...]:
        """The value check of each output where there are several (``forward_check``, then
        ``forward_<name>``); () for a single output, which the kernel returns as a tensor."""
        if not self.outputs:
            return ()
        return (self.forward_check, *(f"forward_{name}" for name, _ in self.outputs[1:]))

    @property
    def grad_checks(self) -> tuple[str, ...]:
        return tuple(f"d{i.name}" for i in self.differentiable)

    @property
    def differentiable(self) -> tuple[Tensor, ...]:
        return tuple(i for i in self.inputs if isinstance(i, Tensor) and i.differentiable)
