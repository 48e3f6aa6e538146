"""An op spec derived from a declaration (harness.registry.declare.OpDecl): everything but the math.

From the declared inputs the engine derives, identically for every declared op:
- floor cases: each symbolic dim in turn at 1, primes, powers of two and their neighbours,
  beyond 4096 (8191 in the interpreter; 16385, 32769 and 65537 on a GPU, past the sizes where
  libraries switch kernels), the other dims at 7; the largest
  input kept within the backend's element budget, the dims that count programs (all but the
  innermost of each input) within the backend's row limit; then the declaration's shapes by
  purpose (``OpDecl.floor_shapes``, on CUDA also ``floor_shapes_gpu``), as given. Crossed with every dtype; the
  layout, value kind and scalar values of each shape and dtype picked by their stable hash
  (harness.cases.case.stable_pick), then per dtype a case for each kind and layout the picks
  left out (``cover``); then each shape the picks left without it as the plain case, contiguous fp32 with rows ignored where the op has an ignorable index (what a
  kernel or library wrapper narrowed to contiguous fp32 takes); per dtype, where the op has two
  tensors of one declared shape, a case in each apart layout (harness.ops.apart: every tensor of
  the call its own row stride and storage offset, and memory orders that differ for each pair in
  some case) on a small shape with at least two elements along every dim. On CUDA also the index-width cases
  (harness.ops.layouts): each float input and the upstream gradient stretched in turn by
  index_width_rows and (2-D and more) index_width_cols, then each index tensor (a target) by
  index_width_rows, rows 3..5 and row lengths 7..33, bf16
  and fp32 in turn, the ``peaked`` value kind where the op has it (a max pass that reads a wrong
  address misses the peak and exp overflows), else its first; never drawn by the strategy;
- a hypothesis strategy drawing the same parameters from the same ranges;
- inputs: the case's value kind for ``Tensor(values="kind")``, each float input placed with
  the case's layout (harness.ops.layouts: every tensor input, index tensors too; under an
  index-width layout only the input the case's ``wide`` names, the others contiguous);
- the oracle: the float64 reference, gradients by float64 autograd through it (or the
  declaration's explicit backward), and per element the spread of both under the input
  dtype's rounding of the inputs and the upstream gradient (harness.compare.rounding; of
  x - row max for the inputs the op declares ``shift_by_max``), which the tolerance allows;
- case ids ``op:M=..,N=..,dtype=..,layout=..,[wide=..,]values=..,<scalars>,[ignored=..,]seed=..``; a
  floor case's seed is a hash of its other parameters (harness.cases.case.content_seed): nothing
  in a floor case depends on where it sits, so a floor that gains a shape keeps every other case
  and id; a generated case's seed is drawn.
A dim the declaration derives (``OpDecl.derived``: D = 2 R, a table of S + 40 rows) is computed
from the drawn ones wherever a case is made, and never drawn itself.
Any method can be overridden in a subclass (``class MyOp(DeclaredOp)``).
"""

from __future__ import annotations

import inspect
import math
import re
from typing import Any

import torch
from hypothesis import strategies as st

from harness.cases.case import Case, content_seed, stable_least, stable_pick
from harness.compare import rounding
from harness.compare.tolerances import Tolerance
from harness.registry.declare import Index, OpDecl, Scalar, Tensor
from harness.registry.opspec import COMMON_CHECKS, Meta, OpInputs, upstreams
from harness.errors import UsageError
from harness.ops import apart, case_params, layouts, leading, row_kinds, strategies, values
from vocabulary import Backend

ALL_IGNORED = "all_ignored"
IGNORED = ("none", "some", "all")
# elements of the largest input; programs (rows) of a row-wise kernel: the interpreter runs
# programs one after another at about 0.8 ms each
BUDGET = {"interpreter": 1 << 15, "cuda": 1 << 22}
MAX_ROWS = {"interpreter": 320, "cuda": 1 << 16}
MAX_INNER = {"interpreter": 8192, "cuda": 1 << 17}
FLOOR_SIZES = (1, 2, 17, 31, 63, 64, 65, 127, 255, 256, 257, 1023, 1025, 4093, 4097, 8191)
# On a GPU also past 2^14, 2^15 and 2^16: libraries switch kernels at such sizes (Liger-Kernel's
# RMSNorm takes its multi-row block kernels at >= 32768 rows of <= 256 columns, its softmax a
# multi-block kernel past 65536 columns), and a path no case reaches is never verified
FLOOR_SIZES_GPU = (16385, 32769, 65537)
COMPANION = 7  # the other dims of a floor shape: small, prime, more than one row
APART_ELEMENTS = 4096  # the largest tensor of an apart case's shape, where a floor shape that small has every dim >= 2
# the CUDA floor's index-width cases (harness.ops.layouts): small shapes, one input stretched
INDEX_WIDTH_DTYPES = (torch.bfloat16, torch.float32)
INDEX_WIDTH_ROWS = (3, 4, 5)  # the dims that count rows
INDEX_WIDTH_INNER = (7, 17, 33)  # the row length


class DeclaredOp:
    """The op spec (harness.registry.opspec.OpSpec) of one OpDecl."""

    def __init__(self, decl: OpDecl, declared_at: str = "") -> None:
        self.decl = decl
        self.declared_at = declared_at
        # read once, not on every oracle call: whether the declared terms take the dtype's smallest normal
        self.terms_take_tiny = _takes_tiny(decl.terms)
        self.rounded_take_tiny = _takes_tiny(decl.rounded_terms)
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
        self.inner = {i.shape[-1] for i in tensors if len(i.shape) == rank}  # the row length; other dims count rows
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

    # --- cases -----------------------------------------------------------------------
    def max_size(self, dim: str, backend: str) -> int:
        limit = (MAX_INNER if dim in self.inner else MAX_ROWS).get(backend, MAX_ROWS["interpreter"])
        return min(limit, self.decl.max_size.get(dim, limit), BUDGET.get(backend, BUDGET["interpreter"]))

    def complete(self, sizes: dict[str, int]) -> dict[str, int]:
        """The drawn dims' sizes with the declaration's derived dims computed from them, in dims order."""
        out = {d: sizes[d] for d in self.free_dims}
        for d, f in self.decl.derived.items():
            out[d] = int(f(dict(out)))
        return {d: out[d] for d in self.dims}

    def fit(self, sizes: dict[str, int], backend: str, keep: str | None = None) -> dict[str, int]:
        """Shrink the drawn dims other than ``keep`` (rows first) until every input and the output are
        within budget."""
        budget = BUDGET.get(backend, BUDGET["interpreter"])
        sizes = self.complete({d: max(1, min(s, self.max_size(d, backend))) for d, s in sizes.items()
                               if d not in self.decl.derived})
        # the output too: matmul's y[M, N] outgrows both of its inputs (and the float64
        # reference holds it twice over), so a budget on the inputs alone is not enough
        shapes = [i.shape for i in self.decl.inputs if not isinstance(i, Scalar)] + list(self.decl.output_shapes)
        for shape in shapes:
            for d in sorted(shape, key=lambda d: (d == keep, d in self.inner)):
                total = math.prod(sizes[x] for x in shape)
                if total > budget and d not in self.decl.derived:
                    sizes[d] = max(1, sizes[d] * budget // total)
                    sizes = self.complete(sizes)
        return sizes

    def case(self, sizes: dict[str, int], dtype: torch.dtype, layout: str, kind: str,
             scalars: dict[str, Any], ignored: str | None, seed: int | None = None, wide: str | None = None,
             lead: tuple[int, ...] | None = None) -> Case:
        """One case of this op; ``seed`` None (a floor case): the seed from the other parameters
        (harness.cases.case.content_seed), a generated case's is drawn."""
        params: dict[str, Any] = dict(sizes)
        if lead is not None:
            params[leading.LEAD] = leading.text(lead)
        params.update(dtype=strategies.dtype_name(dtype), layout=layout)
        if wide is not None:
            params[layouts.WIDE] = wide
        params["values"] = kind
        declared = {s.name: s for s in self.scalars}  # a flag is written true / false
        params.update({k: declared[k].to_case(v) if k in declared else v for k, v in scalars.items()})
        if self.ignorable is not None:
            n_rows = math.prod(sizes[d] for d in self.ignorable.shape)
            ignored = ignored if n_rows > 1 or ignored == "all" else "none"
            high = sizes[self.ignorable.high]
            key = self.ignorable.ignore
            if 0 <= params[key] < high and high == 1 and ignored != "all":
                # the only class is the ignored one: pick a value outside the classes
                spec = next(s for s in self.scalars if s.name == key)
                params[key] = next((v for v in spec.values if not 0 <= v < high), -100)
            params["ignored"] = ignored
        params["seed"] = content_seed(self.name, params.items()) if seed is None else seed
        return Case.of(self.name, **params)

    def floor_shapes(self, backend: str, dims: tuple[str, ...] | None = None,
                     base: dict[str, int] | None = None) -> list[dict[str, int]]:
        """Each of ``dims`` (default: the drawn ones) in turn at the floor sizes, the other drawn
        dims at ``base`` (default: COMPANION for each), within the backend's budget."""
        sizes = FLOOR_SIZES + (FLOOR_SIZES_GPU if backend == Backend.CUDA else ())
        base = base or {d: COMPANION for d in self.free_dims}
        shapes: list[dict[str, int]] = []
        for dim in self.free_dims if dims is None else dims:
            for s in sorted(set(sizes) | set(self.decl.special_sizes.get(dim, ()))):
                if s > self.max_size(dim, backend):
                    continue
                shape = self.fit(dict(base, **{dim: s}), backend, keep=dim)
                if shape not in shapes:
                    shapes.append(shape)
        return shapes

    def declared_shapes(self, backend: str) -> list[dict[str, int]]:
        """The declaration's floor shapes by purpose (``OpDecl.floor_shapes``, and on CUDA
        ``floor_shapes_gpu``), as given, with its derived dims computed."""
        shapes = self.decl.floor_shapes + (self.decl.floor_shapes_gpu if backend == Backend.CUDA else ())
        return [self.complete(dict(s)) for s in shapes]

    def floor_cases(self, *, backend: str) -> list[Case]:
        """Every floor shape in every dtype, each with a value kind, layout, scalars and ignored
        rows picked by a stable hash of the shape and dtype (``stable_pick``), then what the picks
        left out (``cover``), the plain cases, on CUDA the widest rows and the index-width cases,
        and the leading-dims cases. Nothing depends on a case's position: a floor that gains or
        loses a shape keeps every other case (only a cover case may become unneeded). A
        declaration's ``floor`` stands in for all of it."""
        if self.decl.floor is not None:
            return self.decl.floor(self, backend)
        shapes = self.floor_shapes(backend)
        shapes += [s for s in self.declared_shapes(backend) if s not in shapes]
        kinds = self.decl.value_kinds
        cases = []
        for dtype in strategies.DTYPES:
            picked = [self.picked(shape, dtype) for shape in shapes]
            cases += picked + self.cover(shapes, dtype, picked) + self.apart_cases(shapes, dtype)
            if self.ignorable is not None:  # every row ignored: torch's mean is NaN there
                for shape in shapes[:2]:
                    scalars = {s.name: s.values[0] for s in self.scalars}
                    cases.append(self.case(shape, dtype, "contiguous", kinds[0], scalars, "all"))
        cases += self.plain_cases(shapes, kinds, cases)
        if backend == Backend.CUDA:
            cases += self.widest_row_cases(shapes, kinds, cases)
            cases += self.index_width_cases()
        return unique(cases + self.leading_cases(backend))

    def _key(self, shape: dict[str, int]) -> str:
        return ",".join(f"{d}={shape[d]}" for d in self.dims if d in shape)

    def picked(self, shape: dict[str, int], dtype: torch.dtype, kind: str | None = None,
               layout: str | None = None) -> Case:
        """The floor case of ``shape`` in ``dtype``: what is not given picked by the shape and dtype's
        hash. Ignored rows ("none" or "some") alternate over the dtypes of a shape from a start
        the shape picks: "some" ignores the last row on purpose, so a shape that only ever had
        "some" would never show a bug in its last rows (a row loop that stops a block early).
        A declaration's ``pick`` stands in for it."""
        if self.decl.pick is not None:
            return self.decl.pick(self, shape, dtype, kind, layout)
        key, name = self._key(shape), strategies.dtype_name(dtype)
        kind = kind or stable_pick(self.decl.value_kinds, self.name, key, name, "values")
        layout = layout or stable_pick(self.layouts, self.name, key, name, "layout")
        scalars = {s.name: stable_pick(s.values, self.name, key, name, s.name) for s in self.scalars}
        d = strategies.DTYPES.index(dtype) if dtype in strategies.DTYPES else 0
        ignored = ("none", "some")[(stable_pick(range(2), self.name, key, "ignored") + d) % 2]
        return self.case(shape, dtype, layout, kind, scalars, ignored)

    def cover(self, shapes: list[dict[str, int]], dtype: torch.dtype, picked: list[Case],
              kinds: tuple[str, ...] | None = None) -> list[Case]:
        """For each value kind (of ``kinds``, default the declaration's) and each layout that no
        picked case of ``dtype`` has, one case that has it, on a shape its hash picks among those
        of more than one element."""
        roomy = [s for s in shapes if math.prod(s.values()) > 1] or shapes
        name = strategies.dtype_name(dtype)
        out = []
        for kind in self.decl.value_kinds if kinds is None else kinds:
            if all(c.get("values") != kind for c in picked):
                out.append(self.picked(stable_pick(roomy, self.name, name, kind), dtype, kind=kind))
        for layout in self.layouts:
            if all(c.get("layout") != layout for c in picked + out):
                out.append(self.picked(stable_pick(roomy, self.name, name, layout), dtype, layout=layout))
        return out

    def apart_cases(self, shapes: list[dict[str, int]], dtype: torch.dtype) -> list[Case]:
        """A case of ``dtype`` in each apart layout (harness.ops.apart), in the declaration's first
        value kind (a kind of equal or zero rows could hide a row read with the wrong stride), on
        a shape picked by its hash (stable_least) among those with at least two elements along
        every dim (a row stride or a memory order matters only there), the most tensors of one
        shape (attention's q and k where S = T and Hq = Hkv) and, where it can, no tensor above
        APART_ELEMENTS elements."""
        if not self.apart_layouts:
            return []

        def tensor_shapes(shape: dict[str, int]) -> list[tuple[int, ...]]:
            return [tuple(shape[d] for d in dims) for dims in self.tensor_dims]

        def pairs(shape: dict[str, int]) -> int:
            counts = [tensor_shapes(shape).count(s) for s in set(tensor_shapes(shape))]
            return sum(c * (c - 1) // 2 for c in counts)

        spread = [s for s in shapes if all(s[d] >= 2 for d in self.dims if d in s)] or shapes
        most = max(map(pairs, spread))
        spread = [s for s in spread if pairs(s) == most]
        small = [s for s in spread if max(map(math.prod, tensor_shapes(s))) <= APART_ELEMENTS] or spread
        name = strategies.dtype_name(dtype)
        kind = self.decl.value_kinds[0]
        return [self.picked(stable_least(small, self._key, self.name, name, layout), dtype, kind=kind, layout=layout)
                for layout in self.apart_layouts]

    def leading_cases(self, backend: str) -> list[Case]:
        """x[*lead, N] (harness.ops.leading) for an op declaring ``leading``, after every other floor case."""
        if self.leading is None:
            return []
        inner = next(iter(self.inner))
        kinds, out = self.decl.value_kinds, []
        for j, (lead, n, layout, dtype) in enumerate(leading.CASES):
            if layout in (layouts.MIXED, layouts.MIXED_ALT) and layout not in self.layouts:
                continue
            rows = math.prod(lead)
            sizes = self.complete({d: rows if d == self.leading else n if d == inner else COMPANION
                                   for d in self.free_dims})
            scalars = {s.name: s.values[j % len(s.values)] for s in self.scalars}
            ignored = "some" if self.ignorable is not None else None
            out.append(self.case(sizes, dtype, layout, kinds[j % len(kinds)], scalars, ignored, lead=lead))
        return out

    def widest_row_cases(self, shapes: list[dict[str, int]], kinds: tuple[str, ...], have: list[Case]) -> list[Case]:
        """On a GPU, the widest rows (the largest floor size of each row-length dim, where
        libraries take their multi-block paths) in every value kind, contiguous fp32: a hazard
        that only a kind brings (a first block of only -inf, a peak in a later block) must meet
        the path that only the widest rows reach, not by the rotation's luck. Liger-Kernel
        0.8.5's cross-entropy past 32768 classes is such a path (docs/findings.md)."""
        out = []
        for dim in sorted(self.inner):
            widest = max((sh for sh in shapes if sh[dim] > 1), key=lambda sh: sh[dim], default=None)
            if widest is None:
                continue
            present = {c.get("values") for c in have if all(int(c[d]) == widest[d] for d in self.dims)}
            for kind in (k for k in kinds if k not in present):
                scalars = {s.name: stable_pick(s.values, self.name, self._key(widest), kind, s.name) for s in self.scalars}
                ignored = "some" if self.ignorable is not None else None
                out.append(self.case(widest, torch.float32, "contiguous", kind, scalars, ignored))
        return out

    def plain_cases(self, shapes: list[dict[str, int]], kinds: tuple[str, ...], have: list[Case]) -> list[Case]:
        """Each floor shape also as the plain case, contiguous fp32 (rows ignored where the op has
        an ignorable index), where the rotation above gave it none: every kernel takes that case,
        and many wrappers (or a carrier narrowed to what a library passes) take nothing else, so
        without it a size such as V = 1 or V = 32769 reaches them only by the rotation's luck."""
        def plain(c: Case) -> tuple:
            return tuple(c.get(d) for d in self.dims) + (c.get("layout"), c.get("dtype"), c.get("ignored"))

        present = {plain(c) for c in have}
        ignored = "some" if self.ignorable is not None else None
        out = []
        for shape in shapes:
            key = self._key(shape)
            scalars = {s.name: stable_pick(s.values, self.name, key, "plain", s.name) for s in self.scalars}
            case = self.case(shape, torch.float32, "contiguous", stable_pick(kinds, self.name, key, "plain"), scalars, ignored)
            if plain(case) not in present:
                out.append(case)
        return out

    def index_width_cases(self) -> list[Case]:
        """Each float input and the upstream gradient stretched in turn by each index-width
        layout (a 1-D input only by index_width_rows: it has one stride), then each index tensor
        by index_width_rows, the others contiguous."""
        kinds = self.decl.value_kinds
        kind = "peaked" if "peaked" in kinds else kinds[0]
        cases, j = [], 0
        stretched = [(li, layout, k, name, dims) for li, layout in enumerate(layouts.INDEX_WIDTH_LAYOUTS)
                     for k, (name, dims) in enumerate(self.wide_inputs)]
        stretched += [(0, layouts.INDEX_WIDTH_ROWS, len(self.wide_inputs) + k, name, dims)
                      for k, (name, dims) in enumerate(self.wide_index)]
        for li, layout, k, name, dims in stretched:
            if layout == layouts.INDEX_WIDTH_COLS and len(dims) == 1:
                continue
            sizes = {d: (INDEX_WIDTH_INNER if d in self.inner else INDEX_WIDTH_ROWS)[j % 3] for d in self.free_dims}
            sizes = self.complete({d: max(1, min(n, self.max_size(d, "cuda"))) for d, n in sizes.items()})
            if sizes[dims[layouts.index_width_dim(layout, len(dims))]] < layouts.INDEX_WIDTH_MIN:
                continue  # the declaration caps that dim below what the layout needs
            scalars = {s.name: s.values[j % len(s.values)] for s in self.scalars}
            dtype = INDEX_WIDTH_DTYPES[(k + li) % len(INDEX_WIDTH_DTYPES)]  # each input meets both
            # no row ignored: the stretched rows' offsets past 2**31 are the last ones, which
            # "some" always ignores (a loss and gradient that never read them)
            cases.append(self.case(sizes, dtype, layout, kind, scalars, "none", wide=name))
            j += 1
        return cases

    def case_checks(self, case: Case) -> dict[str, case_params.Check]:
        """Each parameter of a case of this op, in case id order, with its check (harness.ops.case_params):
        dims whole >= 1, the dtype, value kind, scalar values (a mode or flag one of the declared,
        a number finite, > 0 where the Scalar says ``positive``), ``ignored``, the seed."""
        def anything(value) -> None:
            return None

        def number(positive: bool) -> case_params.Check:
            finite = case_params.positive_number() if positive else (
                lambda v: None if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                else "a finite number")
            return finite

        checks: dict[str, case_params.Check] = {d: case_params.whole(1) for d in self.dims}
        if case.get(leading.LEAD) is not None:
            checks[leading.LEAD] = anything  # leading.parse says what is wrong with it
        checks["dtype"] = case_params.one_of(strategies.dtype_name(d) for d in strategies.DTYPES)
        checks["layout"] = anything  # below, with the layouts this case may take
        if case.get(layouts.WIDE) is not None:
            checks[layouts.WIDE] = anything  # layouts.check_wide
        checks["values"] = case_params.one_of(self.decl.value_kinds)
        for s in self.scalars:
            if s.is_flag:
                checks[s.name] = case_params.one_of(("true", "false"))
            elif isinstance(s.values[0], str):
                checks[s.name] = case_params.one_of(s.values)
            else:
                checks[s.name] = number(s.positive)
        if self.ignorable is not None:
            checks["ignored"] = case_params.one_of(IGNORED)
        checks["seed"] = case_params.whole(0)
        return checks

    def validate_case(self, case: Case) -> None:
        """Every parameter is there and allowed (``case_checks``); the layout is one of the op's
        (or an index-width one, with a ``wide`` input it can stretch); a derived dim must be
        what the drawn ones make it. A declaration's ``validate`` checks first."""
        if self.decl.validate is not None:
            self.decl.validate(self, case)
        case_params.validate(case, self.case_checks(case))
        drawn = {d: case.get(d) for d in self.free_dims}
        if self.decl.derived and all(isinstance(n, int) and not isinstance(n, bool) for n in drawn.values()):
            for d, n in self.complete(drawn).items():
                if d in self.decl.derived and case.get(d) != n:
                    raise UsageError(f"--case {case.id}: {d}={case.get(d)} is not allowed; the other dims make {d}={n}")
        layout = case.get("layout")
        allowed = self.layouts + self.apart_layouts + layouts.INDEX_WIDTH_LAYOUTS
        if case.get(leading.LEAD) is not None:
            if self.leading is None:
                raise UsageError(f"--case {case.id}: {leading.LEAD} is not allowed; op {self.name} declares no leading dims")
            leading.parse(case, case.get(self.leading))
            allowed = tuple(dict.fromkeys(self.layouts + ("permuted",) + leading.LAYOUTS))
        if layout not in allowed:
            raise UsageError(f"--case {case.id}: layout={layout} is not allowed; layout must be one of {', '.join(allowed)}")
        if layout in layouts.INDEX_WIDTH_LAYOUTS or case.get(layouts.WIDE) is not None:
            sizes = {d: case.get(d) for d in self.dims}
            bad = next((d for d, n in sizes.items() if isinstance(n, bool) or not isinstance(n, int) or n < 1), None)
            if bad is not None:
                raise UsageError(f"--case {case.id}: {bad}={sizes[bad]} is not allowed; {bad} must be a whole number >= 1")
            layouts.check_wide(case, {name: tuple(sizes[d] for d in dims) for name, dims in self.wide_inputs + self.wide_index})

    def case_strategy(self, *, backend: str):
        if self.decl.strategy is not None:
            return self.decl.strategy(self, backend)

        @st.composite
        def cases(draw):
            sizes = {}
            for dim in sorted(self.free_dims, key=lambda d: d not in self.inner):
                top = self.max_size(dim, backend)
                special = sorted(set(strategies.boundary_sizes(max_value=top)) | set(self.decl.special_sizes.get(dim, ())))
                sizes[dim] = draw(strategies.sizes(max_value=top, special=special))
            sizes = self.fit(sizes, backend, keep=next(iter(self.inner)))
            scalars = {s.name: draw(st.sampled_from(s.values)) for s in self.scalars}
            ignored = draw(st.sampled_from(IGNORED)) if self.ignorable is not None else None
            return self.case(
                sizes, draw(strategies.dtypes()), draw(st.sampled_from(self.layouts)),
                draw(st.sampled_from(self.decl.value_kinds)), scalars, ignored, draw(strategies.seeds()),
            )

        return cases()

    # --- inputs ----------------------------------------------------------------------
    def make_inputs(self, case: Case, device: str) -> OpInputs:
        if self.decl.make_inputs is not None:
            return self.decl.make_inputs(self, case, device)
        sizes = {d: int(case[d]) for d in self.dims}
        lead = leading.parse(case) if self.leading else None
        dtype = strategies.dtype_from_name(str(case["dtype"]))
        layout, kind = str(case["layout"]), str(case["values"])
        wide = case.get(layouts.WIDE)
        gen = values.generator(int(case["seed"]))
        args: list[Any] = []
        drawn: dict[tuple[int, ...], torch.Tensor] = {}  # float inputs by shape, before placement
        k = 0  # the tensor inputs' count, for the mixed layout
        members = apart.Members()  # every tensor's place in the call, for the apart layouts
        for inp in self.decl.inputs:
            if isinstance(inp, Scalar):
                args.append(inp.from_case(case[inp.name]))
                continue
            shape = leading.shape(inp.shape, sizes, self.leading, lead)
            if isinstance(inp, Index):
                ignore = int(case[inp.ignore]) if inp.ignore else None
                t = classes(shape, sizes[inp.high], ignore, str(case.get("ignored", "none")), gen)
                logits = drawn.get(shape + (sizes[inp.high],))
                if logits is not None:
                    t = off_masked(t, logits, ignore)
            elif inp.values == "kind":
                t = row_kinds.draw(own_kind(inp, kind, int(case["seed"])), shape, dtype, gen).to(dtype)
            elif inp.values == "mask":
                t = values.additive_mask(shape, dtype, gen).to(dtype)
            elif inp.values == "bool":
                t = values.bool_mask(shape, gen)
            elif inp.values == "gain":
                t = values.gains(math.prod(shape), gen).reshape(shape).to(dtype)
            else:
                t = torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype)
            if not isinstance(inp, Index) and inp.is_float:
                drawn.setdefault(shape, t)
            args.append(place(t, layout, k, inp.name, wide, members, device))
            k += 1
        ups = []
        shapes = self.outputs_dims(sizes, self.scalar_args(args))  # as the op states them (read from a reference)
        for j, dims in enumerate(self.decl.output_shapes):  # one upstream gradient per output
            name = layouts.UPSTREAM if j == 0 else f"{layouts.UPSTREAM}_{self.decl.outputs[j][0]}"
            if lead is not None:
                out_shape = leading.shape(dims, sizes, self.leading, lead)
            else:
                out_shape = tuple(n for _, n in shapes[j])
            if out_shape:
                ups.append(place(values.upstream(out_shape, gen).to(dtype), layout, -1, name, wide, members, device))
            else:  # a scalar: random size and sign, never 1
                size = 0.5 + 3.0 * torch.rand((), generator=gen, dtype=torch.float64)
                ups.append((size * (1 if torch.rand((), generator=gen) < 0.5 else -1)).to(dtype).to(device))
        upstream = tuple(ups) if self.decl.outputs else ups[0]
        grad_wrt = tuple(p for p, i in enumerate(self.decl.inputs) if isinstance(i, Tensor) and i.differentiable)
        return OpInputs(args=tuple(args), grad_wrt=grad_wrt, upstream=upstream, dtype=dtype, layout=layout)

    # --- oracle and tolerance ----------------------------------------------------------
    def evaluate(self, args: list[Any], upstream, grad_wrt: tuple[int, ...]) -> list[torch.Tensor]:
        """[output(s), *gradients] of the float64 reference; ``upstream``: one tensor per output
        (a tuple where the op has several)."""
        ups = upstreams(upstream)
        if self.decl.backward is not None:
            with torch.no_grad():
                outs = self._outs(self.decl.reference(*args))
            return [*outs, *self.decl.backward(*args, *ups)]
        leaves = [a.detach().requires_grad_(p in grad_wrt) if p in grad_wrt else a for p, a in enumerate(args)]
        with torch.enable_grad():
            outs = self._outs(self.decl.reference(*leaves))
            wrt = [leaves[p] for p in grad_wrt]
            used = [(o, u) for o, u in zip(outs, ups) if o.requires_grad]
            grads = torch.autograd.grad([o for o, _ in used], wrt, grad_outputs=[u for _, u in used],
                                        allow_unused=True) if wrt and used else [None] * len(wrt)
        grads = [torch.zeros_like(w) if g is None else g for g, w in zip(grads, wrt)]
        return [*(o.detach() for o in outs), *(g.detach() for g in grads)]

    def _outs(self, value) -> tuple[torch.Tensor, ...]:
        """The reference's output(s) as a tuple, as many as the op declares."""
        outs = tuple(value) if self.decl.outputs else (value,)
        if len(outs) != len(self.decl.output_shapes):
            raise ValueError(f"op {self.name!r}: the reference returned {len(outs)} output(s), the declaration "
                             f"names {len(self.decl.output_shapes)}")
        return outs

    def oracle(self, inputs: OpInputs) -> dict[str, torch.Tensor]:
        f64 = [a.detach().to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
               for a in inputs.args]
        floats = [p for p, a in enumerate(f64) if isinstance(a, torch.Tensor) and a.is_floating_point()]
        ups = [u.detach().to(torch.float64) for u in upstreams(inputs.upstream)]
        upstream = tuple(ups) if self.decl.outputs else ups[0]

        def evaluate(perturbed: list[torch.Tensor]) -> list[torch.Tensor]:
            args = list(f64)
            for p, t in zip(floats, perturbed):
                args[p] = t
            rest = perturbed[len(floats):]
            return self.evaluate(args, tuple(rest) if self.decl.outputs else rest[0], inputs.grad_wrt)

        tensors = [f64[p] for p in floats] + ups
        base = evaluate(tensors)
        shifted = [self.decl.inputs[p].name in self.decl.shift_by_max for p in floats] + [False] * len(ups)
        centers = [rounding.row_max_center(t) if s else None for t, s in zip(tensors, shifted)]
        spreads = rounding.spread(evaluate, tensors, rounding.unit_roundoff(inputs.dtype), base, centers=centers)
        terms = self.terms(f64, upstream, base, inputs.grad_wrt, inputs.dtype)
        n_out = len(base) - len(inputs.grad_wrt)
        grad_of = {floats.index(p): n_out + j for j, p in enumerate(inputs.grad_wrt) if p in floats}
        for k, extra in rounding.shift_residues(evaluate, tensors, base, n_out, grad_of).items():
            terms[k] = terms[k] + extra.to(terms[k].device)
        first = self.oracle_forward_name(inputs)
        names = [first, *self.output_checks[1:], *self.grad_checks]
        expected = {}
        rounded = self.rounded(f64, upstream, len(base), inputs.dtype)
        for name, value, spread, term, n, extra in zip(names, base, spreads, terms, self.sum_lengths(inputs), rounded):
            expected[name] = value
            expected[f"{name}_magnitude"] = rounding.allowance(spread, term, n)
            if extra is not None:
                expected[f"{name}_magnitude"] = expected[f"{name}_magnitude"] + extra
            expected[f"{name}_terms"] = term  # for a kernel declaring Contract(precision="input")
        self.ignored_rows_exact(inputs, f64, expected)
        return expected

    def ignored_rows(self, inputs: OpInputs) -> torch.Tensor:
        """Where the ignorable index equals the case's ignore_index (bool, the index's shape)."""
        p = self.decl.inputs.index(self.ignorable)
        q = next(k for k, i in enumerate(self.decl.inputs) if i.name == self.ignorable.ignore)
        return inputs.args[p] == inputs.args[q]

    def ignored_rows_exact(self, inputs: OpInputs, f64: list[Any], expected: dict) -> None:
        """An ignored row (its index equal to ignore_index) does not reach the result, so the exact
        gradient of its elements is 0. Torch's formula, which the float64 autograd follows, gives
        0 * NaN = NaN there when the row holds a NaN or inf (p = softmax of it): both are accepted
        on such a row (``<check>_nan_ok``), and 0 is demanded on an ignored row of finite values."""
        if self.ignorable is None:
            return
        ignored = self.ignored_rows(inputs)
        if not bool(ignored.any()):
            return
        lead = len(self.ignorable.shape)
        for name, inp in zip(self.grad_checks, self.decl.differentiable):
            if tuple(inp.shape[:lead]) != tuple(self.ignorable.shape):
                continue  # not laid out by rows of the index: no row to ignore
            k = self.decl.inputs.index(inp)
            rows = ignored.reshape(ignored.shape + (1,) * (len(inp.shape) - lead)).to(expected[name].device)
            nonfinite = ~torch.isfinite(f64[k]).reshape(*ignored.shape, -1).all(-1)
            nonfinite = nonfinite.reshape(rows.shape).to(rows.device)
            expected[name] = torch.where(rows, torch.zeros_like(expected[name]), expected[name])
            for key in (f"{name}_magnitude", f"{name}_terms"):
                expected[key] = torch.where(rows, torch.zeros_like(expected[key]), expected[key])
            expected[f"{name}_nan_ok"] = (rows & nonfinite).expand_as(expected[name])

    def rounded(self, f64: list[Any], upstream, count: int, dtype: torch.dtype) -> list[torch.Tensor | None]:
        """Per check, what a kernel may add by computing from an intermediate it keeps in the input
        dtype (OpDecl.rounded_terms, finite parts only) times that dtype's unit roundoff."""
        if self.decl.rounded_terms is None:
            return [None] * count
        u = rounding.unit_roundoff(dtype)
        floor = _tiny(dtype) if self.rounded_take_tiny else {}
        out = list(self.decl.rounded_terms(*f64, *upstreams(upstream), **floor))
        if len(out) != count:
            raise ValueError(f"op {self.name!r}: rounded_terms returned {len(out)} entries, one per check ({count}) "
                             "was expected")
        return [None if t is None else u * torch.where(torch.isfinite(t), t.abs(), 0.0).to(torch.float64)
                for t in out]

    def terms(self, f64: list[Any], upstream, base: list[torch.Tensor], grad_wrt,
              dtype: torch.dtype = torch.float32) -> list[torch.Tensor]:
        """Per check, the size of the terms its formula sums or cancels: the declaration's, else
        |result| for each output and, for a gradient, the larger of |result| and the gradient
        for |upstream|: the upstream's signs are what make a gradient's sums cancel (the sum
        over rows of a broadcast input such as a bias, db = sum dy), and |dy| removes them."""
        ups = upstreams(upstream)
        k = len(ups)  # outputs first in ``base``, then the gradients
        declared = list(self.decl.terms(*f64, *ups, **self.terms_floor(dtype))) if self.decl.terms is not None \
            else [None] * len(base)
        if len(declared) != len(base):
            raise ValueError(f"op {self.name!r}: terms returned {len(declared)} entries, one per check ({len(base)}) "
                             "was expected")
        out = [base[j].abs() if declared[j] is None else declared[j] for j in range(k)]
        if any(t is None for t in declared[k:]):
            unsigned_up = tuple(u.abs() for u in ups)
            unsigned = self.evaluate(list(f64), unsigned_up if self.decl.outputs else unsigned_up[0], grad_wrt)[k:]
        for j, t in enumerate(declared[k:]):
            out.append(torch.maximum(base[k + j].abs(), unsigned[j].abs()) if t is None else t)
        return out

    def terms_floor(self, dtype: torch.dtype) -> dict[str, float]:
        """``tiny=`` for a declared ``terms`` that takes it (OpDecl): the smallest normal of the case's dtype."""
        return _tiny(dtype) if self.terms_take_tiny else {}

    def sum_lengths(self, inputs: OpInputs) -> list[int]:
        """Per check, the longest sum it involves: the declared ``reduces`` dims, and for a
        gradient also the output dims its input lacks (broadcasting sums over them)."""
        sizes = self.sizes(inputs)
        declared = max((sizes[d] for d in self.decl.reduces), default=1)
        out = [declared] * len(self.decl.output_shapes)
        for inp in self.decl.differentiable:
            missing = max(math.prod(sizes[d] for d in dims if d not in inp.shape) for dims in self.decl.output_shapes) \
                if self.decl.outputs else math.prod(
                    n for d, n in self.output_dims(sizes, self.scalar_args(inputs.args)) if d not in inp.shape)
            out.append(max(declared, missing))
        return out

    def oracle_forward_name(self, inputs: OpInputs) -> str:
        if self.ignorable is not None:
            if bool(self.ignored_rows(inputs).all()):
                return ALL_IGNORED
        return self.forward_check

    def check_name(self, check: str, case: Case) -> str:
        if check == self.forward_check and case.get("ignored") == "all":
            return ALL_IGNORED
        return check

    def tolerance(self, check: str, case: Case, dtype: torch.dtype) -> Tolerance:
        """The backward-error estimate (harness.compare.rounding): the oracle's ``_magnitude``
        is the allowance for the inputs' rounding and the fp32 arithmetic, added as is; an
        integer or bool output (argmax's indices) has none."""
        if not (dtype.is_floating_point or dtype.is_complex):
            return Tolerance(0.0, 0.0, why="an integer or bool output, compared exactly", terms_rtol=0.0,
                             model="rounding")
        return Tolerance(
            rounding.output_atol(dtype), rounding.output_rtol(dtype),
            why="rounding spread of the float64 reference (harness.compare.rounding)",
            terms_rtol=1.0, model="rounding",
        )

    def sizes(self, inputs: OpInputs) -> dict[str, int]:
        """The symbolic dims' values, read from the inputs' shapes."""
        sizes = {}
        for inp, arg in zip(self.decl.inputs, inputs.args):
            if not isinstance(inp, Scalar):
                sizes.update(leading.sizes_of(inp.shape, tuple(arg.shape), self.leading))
        return sizes

    def forward_metas(self, inputs: OpInputs) -> list[Meta]:
        """Each output's shape and dtype (x's dtype, as the first float input's): one per output."""
        if not self.decl.outputs:
            return [self.forward_meta(inputs)]
        sizes, first = self.sizes(inputs), self.forward_meta(inputs)
        lead = first.shape[: len(first.shape) - len(self.decl.output) + 1] if self.decl.output else ()
        shapes = self.outputs_dims(sizes, self.scalar_args(inputs.args))
        return [Meta(leading.shape(dims, sizes, self.leading, lead) if self.leading and dims[:1] == (self.leading,)
                     else tuple(n for _, n in shape), first.dtype) for dims, shape in zip(self.decl.output_shapes, shapes)]

    def forward_meta(self, inputs: OpInputs) -> Meta:
        sizes = self.sizes(inputs)
        first = next(a for i, a in zip(self.decl.inputs, inputs.args) if isinstance(i, Tensor) and i.is_float)
        lead = next((tuple(a.shape[: a.dim() - len(i.shape) + 1]) for i, a in zip(self.decl.inputs, inputs.args)
                     if not isinstance(i, Scalar) and i.shape[0] == self.leading and a.dim() > len(i.shape)), None)
        if lead is not None:
            return Meta(leading.shape(self.decl.output, sizes, self.leading, lead), first.dtype)
        return Meta(tuple(n for _, n in self.output_dims(sizes, self.scalar_args(inputs.args))), first.dtype)

    def scalar_args(self, args) -> dict[str, Any]:
        """The scalar arguments of a call, by name (a mode that sets the output's shape)."""
        return {i.name: a for i, a in zip(self.decl.inputs, args) if isinstance(i, Scalar)}

    def outputs_dims(self, sizes: dict[str, int], scalars: dict[str, Any] | None = None) -> list[list[tuple[str | None, int]]]:
        """Each output's axes, as ``output_dims`` gives the one output's."""
        if not self.decl.outputs:
            return [self.output_dims(sizes, scalars)]
        return [[(d, sizes[d]) for d in dims] for dims in self.decl.output_shapes]

    def output_dims(self, sizes: dict[str, int], scalars: dict[str, Any] | None = None) -> list[tuple[str | None, int]]:
        """The output's axes: (the dim it is, None for a fixed one; its size), given the call's
        scalars (``scalars``: a declared op's output shape does not depend on them)."""
        return [(d, sizes[d]) for d in self.decl.output]


def place(t: torch.Tensor, layout: str, k: int, name: str, wide: str | None, members: apart.Members,
          device: str) -> torch.Tensor:
    """The k-th tensor input of a case (k = -1: an upstream gradient), named ``name``, in the
    case's ``layout``; ``members`` numbers the call's tensors for an apart layout."""
    n, j = members.next(tuple(t.shape))
    if apart.is_apart(layout):
        return apart.place(t, layout, n, j, device)
    return leading.place(t, layouts.for_input(layout, k, name, wide), device)


def own_kind(inp: Tensor, kind: str, seed: int) -> str:
    """The value kind of a float input in a case of ``kind``: the case's, unless the input has
    its own kinds (``Tensor(kinds=...)``) that lack it; then one of them, picked by the seed."""
    if not inp.kinds or kind in inp.kinds:
        return kind
    return inp.kinds[seed % len(inp.kinds)]


def _takes_tiny(fn) -> bool:
    """Whether a declared ``terms`` or ``rounded_terms`` takes the keyword ``tiny`` (OpDecl)."""
    return fn is not None and "tiny" in inspect.signature(fn).parameters


def _tiny(dtype: torch.dtype) -> dict[str, float]:
    return {"tiny": float(torch.finfo(dtype).smallest_normal)}


def unique(cases: list[Case]) -> list[Case]:
    """The floor without repeats, in order: two floor cases of the same parameters have the same
    seed (content_seed), so they are one case."""
    return list(dict.fromkeys(cases))


def classes(shape: tuple[int, ...], high: int, ignore: int | None, ignored: str, gen: torch.Generator) -> torch.Tensor:
    """Random class ids in [0, high) other than ``ignore``, class 0 and high-1 each hit when
    there is room; then none, some (at least one, the last among them, not all) or all rows set
    to ``ignore``."""
    n = math.prod(shape)
    allowed = torch.tensor([c for c in range(high) if c != ignore] or [0], dtype=torch.int64)
    t = allowed[torch.randint(len(allowed), (n,), generator=gen)]
    order = torch.randperm(n, generator=gen).tolist()
    for row, c in zip(order[: max(0, n - 1)], [c for c in (0, high - 1) if c != ignore]):
        t[row] = c
    if ignore is not None and ignored != "none":
        rows = torch.ones(n, dtype=torch.bool) if ignored == "all" else torch.rand(n, generator=gen) < 0.3
        if ignored == "some":
            rows[order[0]] = True
            if n > 1:  # the last row is ignored (a kernel's reads for an ignored row at the end of
                # the tensor, past it when the target is replaced by a wrong column), another kept
                rows[n - 1] = True
                rows[order[-1] if order[-1] != n - 1 else order[-2]] = False
        t = torch.where(rows, torch.full_like(t, ignore), t)
    return t.reshape(shape)


def off_masked(target: torch.Tensor, logits: torch.Tensor, ignore: int | None) -> torch.Tensor:
    """A class whose logit is -inf (a masked vocabulary entry) is never a label: a row whose
    target lands on one takes its first class that is neither -inf nor ``ignore`` instead (the
    loss would be +inf, which says nothing about a kernel's arithmetic). Rows without such a
    class, and ignored rows, keep theirs."""
    masked = logits == float("-inf")
    if not bool(masked.any()):
        return target
    rows = target.reshape(-1)
    flat = masked.reshape(rows.numel(), -1)
    usable = ~flat
    if ignore is not None and 0 <= ignore < flat.shape[1]:
        usable[:, ignore] = False
    hit = (rows >= 0) & (rows < flat.shape[1])  # an ignore_index outside [0, V) is never a class
    if ignore is not None:
        hit &= rows != ignore
    hit &= flat[torch.arange(rows.numel()), rows.clamp(0, flat.shape[1] - 1)]
    hit &= usable.any(1)
    first = usable.to(torch.int8).argmax(1)
    return torch.where(hit, first, rows).reshape(target.shape)
