"""What a case of a declared op is (harness.ops.derive): the backend's size limits, a drawn
shape completed with the derived dims and fitted to the budget, the case itself with its id's
parameters in order and a floor case's content seed, and the checks of a ``--case`` id's
parameters. Functions of the op (harness.ops.derive.op.DeclaredOp), bound as its methods."""

from __future__ import annotations

import math
from typing import Any

import torch

from harness.cases.case import Case, content_seed
from harness.errors import UsageError
from harness.registry.declare import Scalar
from harness.ops import case_params, layouts, leading, strategies

ALL_IGNORED = "all_ignored"
IGNORED = ("none", "some", "all")
# elements of the largest input; programs (rows) of a row-wise kernel: the interpreter runs
# programs one after another at about 0.8 ms each
BUDGET = {"interpreter": 1 << 15, "cuda": 1 << 22}
MAX_ROWS = {"interpreter": 320, "cuda": 1 << 16}
MAX_INNER = {"interpreter": 8192, "cuda": 1 << 17}


def max_size(op, dim: str, backend: str) -> int:
    limit = (MAX_INNER if dim in op.inner else MAX_ROWS).get(backend, MAX_ROWS["interpreter"])
    return min(limit, op.decl.max_size.get(dim, limit), BUDGET.get(backend, BUDGET["interpreter"]))


def complete(op, sizes: dict[str, int]) -> dict[str, int]:
    """The drawn dims' sizes with the declaration's derived dims computed from them, in dims order."""
    out = {d: sizes[d] for d in op.free_dims}
    for d, f in op.decl.derived.items():
        out[d] = int(f(dict(out)))
    return {d: out[d] for d in op.dims}


def fit(op, sizes: dict[str, int], backend: str, keep: str | None = None) -> dict[str, int]:
    """Shrink the drawn dims other than ``keep`` (rows first) until every input and the output are
    within budget."""
    budget = BUDGET.get(backend, BUDGET["interpreter"])
    sizes = op.complete({d: max(1, min(s, op.max_size(d, backend))) for d, s in sizes.items()
                           if d not in op.decl.derived})
    # the output too: matmul's y[M, N] outgrows both of its inputs (and the float64
    # reference holds it twice over), so a budget on the inputs alone is not enough
    shapes = [i.shape for i in op.decl.inputs if not isinstance(i, Scalar)] + list(op.decl.output_shapes)
    for shape in shapes:
        for d in sorted(shape, key=lambda d: (d == keep, d in op.inner)):
            total = math.prod(sizes[x] for x in shape)
            if total > budget and d not in op.decl.derived:
                sizes[d] = max(1, sizes[d] * budget // total)
                sizes = op.complete(sizes)
    return sizes


def case(op, sizes: dict[str, int], dtype: torch.dtype, layout: str, kind: str,
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
    declared = {s.name: s for s in op.scalars}  # a flag is written true / false
    params.update({k: declared[k].to_case(v) if k in declared else v for k, v in scalars.items()})
    if op.ignorable is not None:
        n_rows = math.prod(sizes[d] for d in op.ignorable.shape)
        ignored = ignored if n_rows > 1 or ignored == "all" else "none"
        high = sizes[op.ignorable.high]
        key = op.ignorable.ignore
        if 0 <= params[key] < high and high == 1 and ignored != "all":
            # the only class is the ignored one: pick a value outside the classes
            spec = next(s for s in op.scalars if s.name == key)
            params[key] = next((v for v in spec.values if not 0 <= v < high), -100)
        params["ignored"] = ignored
    params["seed"] = content_seed(op.name, params.items()) if seed is None else seed
    return Case.of(op.name, **params)


def case_checks(op, case: Case) -> dict[str, case_params.Check]:
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

    checks: dict[str, case_params.Check] = {d: case_params.whole(1) for d in op.dims}
    if case.get(leading.LEAD) is not None:
        checks[leading.LEAD] = anything  # leading.parse says what is wrong with it
    checks["dtype"] = case_params.one_of(strategies.dtype_name(d) for d in strategies.DTYPES)
    checks["layout"] = anything  # below, with the layouts this case may take
    if case.get(layouts.WIDE) is not None:
        checks[layouts.WIDE] = anything  # layouts.check_wide
    checks["values"] = case_params.one_of(op.decl.value_kinds)
    for s in op.scalars:
        if s.is_flag:
            checks[s.name] = case_params.one_of(("true", "false"))
        elif isinstance(s.values[0], str):
            checks[s.name] = case_params.one_of(s.values)
        else:
            checks[s.name] = number(s.positive)
    if op.ignorable is not None:
        checks["ignored"] = case_params.one_of(IGNORED)
    checks["seed"] = case_params.whole(0)
    return checks


def validate_case(op, case: Case) -> None:
    """Every parameter is there and allowed (``case_checks``); the layout is one of the op's
    (or an index-width one, with a ``wide`` input it can stretch); a derived dim must be
    what the drawn ones make it. A declaration's ``validate`` checks first."""
    if op.decl.validate is not None:
        op.decl.validate(op, case)
    case_params.validate(case, op.case_checks(case))
    drawn = {d: case.get(d) for d in op.free_dims}
    if op.decl.derived and all(isinstance(n, int) and not isinstance(n, bool) for n in drawn.values()):
        for d, n in op.complete(drawn).items():
            if d in op.decl.derived and case.get(d) != n:
                raise UsageError(f"--case {case.id}: {d}={case.get(d)} is not allowed; the other dims make {d}={n}")
    layout = case.get("layout")
    allowed = op.layouts + op.apart_layouts + layouts.INDEX_WIDTH_LAYOUTS
    if case.get(leading.LEAD) is not None:
        if op.leading is None:
            raise UsageError(f"--case {case.id}: {leading.LEAD} is not allowed; op {op.name} declares no leading dims")
        leading.parse(case, case.get(op.leading))
        allowed = tuple(dict.fromkeys(op.layouts + ("permuted",) + leading.LAYOUTS))
    if layout not in allowed:
        raise UsageError(f"--case {case.id}: layout={layout} is not allowed; layout must be one of {', '.join(allowed)}")
    if layout in layouts.INDEX_WIDTH_LAYOUTS or case.get(layouts.WIDE) is not None:
        sizes = {d: case.get(d) for d in op.dims}
        bad = next((d for d, n in sizes.items() if isinstance(n, bool) or not isinstance(n, int) or n < 1), None)
        if bad is not None:
            raise UsageError(f"--case {case.id}: {bad}={sizes[bad]} is not allowed; {bad} must be a whole number >= 1")
        layouts.check_wide(case, {name: tuple(sizes[d] for d in dims) for name, dims in op.wide_inputs + op.wide_index})
