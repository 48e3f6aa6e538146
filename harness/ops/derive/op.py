"""The op spec of a declaration (harness.registry.opspec.OpSpec): ``DeclaredOp``, one face over
the derivation by concern (harness.ops.derive). What it reads off the declaration once (dims,
layouts, the inputs an index-width case may stretch) is set here; every other method is a
function of the op in the module of its concern, bound here, so that a declaration's hooks
(``OpDecl.floor``, ``pick``, ``strategy``, ``make_inputs``), which receive the op, and a subclass
(``class MyOp(DeclaredOp)``) that overrides a method reach the others through the op."""

from __future__ import annotations

import re

from harness.cases.case import Case
from harness.registry.declare import Index, OpDecl, Scalar, Tensor
from harness.registry.opspec import COMMON_CHECKS
from harness.ops import apart, layouts, strategies
from harness.ops.derive import cases, draw, floor, inputs, oracle, shapes, tolerance
from harness.ops.derive.cases import ALL_IGNORED


class DeclaredOp:
    """The op spec (harness.registry.opspec.OpSpec) of one OpDecl."""

    def __init__(self, decl: OpDecl, declared_at: str = "") -> None:
        self.decl = decl
        self.declared_at = declared_at
        # read once, not on every oracle call: whether the declared terms take the dtype's smallest normal
        self.terms_take_tiny = tolerance.takes_tiny(decl.terms)
        self.rounded_take_tiny = tolerance.takes_tiny(decl.rounded_terms)
        self.name = decl.name
        self.signature = decl.signature
        self.forward_check = decl.forward_check
        self.grad_checks = decl.grad_checks
        self.output_checks = decl.output_checks  # () for one output (properties.ops: several, e.g. add_rmsnorm)
        self.__doc__ = decl.doc or self.__doc__
        tensors = [i for i in decl.inputs if not isinstance(i, Scalar)]
        self.dims = tuple(dict.fromkeys(d for i in tensors for d in i.shape))
        self.free_dims = tuple(d for d in self.dims if d not in decl.derived)  # drawn; the others computed
        rank = max(len(i.shape) for i in tensors)
        # the row length; other dims count rows. In declaration order: the first is the one a case keeps
        # (a set here made the cases depend on the process's string hash seed)
        self.inner = tuple(dict.fromkeys(i.shape[-1] for i in tensors if len(i.shape) == rank))
        self.scalars = tuple(i for i in decl.inputs if isinstance(i, Scalar))
        self.leading = decl.leading  # a dim that cases also give as several leading dims (harness.ops.leading)
        self.ignorable = next((i for i in decl.inputs if isinstance(i, Index) and i.ignore), None)
        # the forward check of a case whose every row is ignored is recorded (and waivable) under its own name
        self.special_checks = (ALL_IGNORED,) if self.ignorable is not None else ()
        self.layouts = layouts.PERMUTED_LAYOUTS if rank > 2 else strategies.LAYOUTS
        if len(tensors) > 1 or decl.output:  # tensors (the upstream gradient too) in different layouts in one call
            self.layouts = self.layouts + (layouts.MIXED,)
        if len(tensors) > 1 and decl.output:  # each stride of dy unlike each of input 1's too
            self.layouts = self.layouts + (layouts.MIXED_ALT,)
        # tensors of one call that a kernel may read with each other's strides: the declared
        # shapes of the inputs and upstream gradients; layouts that set each one's strides apart
        # where two share a declared shape, with an order bit for each doubling of the largest
        # number of tensors of one rank (two of them may coincide in a case: attention's q and k)
        self.tensor_dims = tuple(i.shape for i in tensors) + tuple(s for s in decl.output_shapes if s)
        ranks = [len(s) for s in self.tensor_dims if s]
        shared = len(set(self.tensor_dims)) < len(self.tensor_dims)
        self.apart_layouts = apart.layouts_for(max(ranks.count(r) for r in ranks)) if shared else ()
        # what an index-width case may stretch (its ``wide``): each float input, the upstream gradient,
        self.wide_inputs = tuple((i.name, i.shape) for i in decl.inputs if isinstance(i, Tensor))
        if decl.output:
            self.wide_inputs += ((layouts.UPSTREAM, decl.output),)
        # an op of several outputs: the upstream gradient of each other output, named upstream_<output>
        self.wide_inputs += tuple((f"{layouts.UPSTREAM}_{name}", shape) for name, shape in decl.outputs[1:] if shape)
        # and each index tensor (a target read as T + row * stride), after them: 17 GB in int64
        self.wide_index = tuple((i.name, i.shape) for i in decl.inputs if isinstance(i, Index))
        self.dims = decl.dim_order or self.dims  # the drawn dims keep the inputs' order
        self.layouts = decl.layouts or self.layouts

    def check_names(self) -> tuple[str, ...]:
        """Every name a record of this op's ``check`` field can carry (what a waiver may name)."""
        return tuple(dict.fromkeys((self.forward_check, *self.output_checks, *self.grad_checks, *self.special_checks, *COMMON_CHECKS)))

    def input_names(self) -> tuple[str, ...]:
        """The kernel's arguments' names in order, read from ``signature`` (``f(x[M, N], gamma[N],
        eps)`` -> x, gamma, eps): what per-tensor contract fields name."""
        inner = self.signature[self.signature.find("(") + 1:]
        names, depth, token = [], 0, ""
        for ch in inner:
            if depth == 0 and ch in ",)":
                names.append(re.match(r"\s*(\w*)", token).group(1))
                token = ""
                if ch == ")":
                    break
                continue
            depth += (ch == "[") - (ch == "]")
            token += ch
        return tuple(n for n in names if n)

    def value_checks(self) -> tuple[str, ...]:
        """Every value check: each output's, then each gradient's."""
        return (*(self.output_checks or (self.forward_check,)), *self.grad_checks)

    def check_name(self, check: str, case: Case) -> str:
        if check == self.forward_check and case.get("ignored") == "all":
            return ALL_IGNORED
        return check

    # --- cases (harness.ops.derive.cases) ----------------------------------------------
    max_size = cases.max_size
    complete = cases.complete
    fit = cases.fit
    case = cases.case
    case_checks = cases.case_checks
    validate_case = cases.validate_case

    # --- floor (harness.ops.derive.floor) ----------------------------------------------
    floor_shapes = floor.floor_shapes
    declared_shapes = floor.declared_shapes
    floor_cases = floor.floor_cases
    _key = floor.key
    picked = floor.picked
    cover = floor.cover
    apart_cases = floor.apart_cases
    leading_cases = floor.leading_cases
    widest_row_cases = floor.widest_row_cases
    plain_cases = floor.plain_cases
    index_width_cases = floor.index_width_cases

    # --- strategy (harness.ops.derive.draw) --------------------------------------------
    case_strategy = draw.case_strategy

    # --- inputs (harness.ops.derive.inputs, .shapes) -----------------------------------
    make_inputs = inputs.make_inputs
    sizes = shapes.sizes
    forward_metas = shapes.forward_metas
    forward_meta = shapes.forward_meta
    scalar_args = shapes.scalar_args
    outputs_dims = shapes.outputs_dims
    output_dims = shapes.output_dims

    # --- oracle (harness.ops.derive.oracle) --------------------------------------------
    evaluate = oracle.evaluate
    _outs = oracle.outs
    ignored_rows = oracle.ignored_rows
    ignored_rows_exact = oracle.ignored_rows_exact
    oracle_forward_name = oracle.oracle_forward_name
    oracle = oracle.oracle  # last: from here on the name is the method, not the module

    # --- tolerance (harness.ops.derive.tolerance) --------------------------------------
    rounded = tolerance.rounded
    terms = tolerance.terms
    terms_floor = tolerance.terms_floor
    sum_lengths = tolerance.sum_lengths
    tolerance = tolerance.tolerance  # last, as oracle above
