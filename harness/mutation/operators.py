"""Mutation operators for Triton kernels: one small generator per operator, in one table.

Each operator receives one AST node of a ``@triton.jit`` function and the function's
:class:`Scope`, and yields replacement nodes (it never modifies the node it is given). The
engine (``harness.mutation.mutagen``) visits every node of every kernel in a fixed order and applies
the operators in table order, so a generated mutant's name always denotes the same change.
``HOST_OPERATORS`` do the same for the module's other top-level functions, the host code that
launches the kernels (wrappers): their changes are in the arguments a launch passes.

Replacements that could never compile on a GPU are not generated at all (e.g. a runtime
size as a ``tl.arange`` bound: shapes must be ``tl.constexpr``); everything else that fails
to compile is reported as ``incompetent`` by the campaign.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
from typing import Callable, Iterator

__all__ = ["BACKENDS", "HOST_OPERATORS", "OPERATORS", "Scope", "Operator"]

Operator = Callable[[ast.AST, "Scope"], Iterator[ast.AST]]

# calls whose arguments are shapes (must stay tl.constexpr) or whose constants have their own operator
SHAPE_CALLS = {"arange", "zeros", "full", "reshape", "view", "broadcast_to", "expand_dims", "program_id", "num_programs"}
MEMORY_CALLS = {"load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg", "atomic_cas", "atomic_and", "atomic_or"}
LOOP_CALLS = {"range", "static_range"}
REDUCTION_CALLS = {"sum", "max", "min", "argmax", "argmin", "reduce"}  # positional axis second


@dataclasses.dataclass
class Scope:
    """What the operators need to know about one jit function's parameters."""

    params: tuple[str, ...]
    constexprs: frozenset[str]
    parents: dict[int, ast.AST]  # id(node) -> parent node
    # host code: the module's jit functions and their parameters, in order (what a launch binds)
    kernels: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @property
    def size_to_block(self) -> dict[str, str]:
        """Runtime logical sizes and the block size that tiles them: N <-> BLOCK, P <-> BLOCK_P."""
        pairs = {}
        for block in sorted(self.constexprs):
            if not block.startswith("BLOCK"):
                continue
            size = block.removeprefix("BLOCK_") if block != "BLOCK" else "N"
            if size in self.params and size not in self.constexprs:
                pairs[size] = block
        return pairs

    @property
    def stride_partner(self) -> dict[str, str]:
        """Each stride parameter and the other stride of the same tensor (stride_xm <-> stride_xn)."""
        strides = [p for p in self.params if p.startswith("stride")]
        out = {}
        for s in strides:
            others = [t for t in strides if t != s and t[:-1] == s[:-1]]
            if others:
                out[s] = others[0]
        return out

    def parent(self, node: ast.AST) -> ast.AST | None:
        return self.parents.get(id(node))

    def enclosing_call(self, node: ast.AST) -> tuple[ast.Call | None, str | None]:
        """The call ``node`` is an argument of (directly), and the keyword it is passed as."""
        parent = self.parent(node)
        if isinstance(parent, ast.keyword):
            call = self.parent(parent)
            return (call, parent.arg) if isinstance(call, ast.Call) else (None, None)
        if isinstance(parent, (ast.List, ast.Tuple)):
            parent = self.parent(parent)  # shapes passed as [BLOCK] or (BLOCK_M, BLOCK_N)
        if isinstance(parent, ast.Call) and node is not parent.func:
            return parent, None
        return None, None

    def inside_call(self, node: ast.AST, names: set[str]) -> bool:
        parent = self.parent(node)
        while parent is not None and not isinstance(parent, ast.stmt):
            if isinstance(parent, ast.Call) and call_name(parent) in names:
                return True
            parent = self.parent(parent)
        return False


def call_name(node: ast.AST) -> str | None:
    """``tl.sum(...)`` -> "sum", ``range(...)`` -> "range", ``x.to(...)`` -> "to"."""
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    if isinstance(node.func, ast.Name):
        return node.func.id
    return None


def _is_tl_call(node: ast.AST, *names: str) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "tl"
        and node.func.attr in names
    )


def _keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


def _tl(attr: str) -> ast.Attribute:
    return ast.Attribute(value=ast.Name(id="tl", ctx=ast.Load()), attr=attr, ctx=ast.Load())


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


# --- the operators -------------------------------------------------------------------------


def size_block_swap(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """Logical size <-> block size: ``N`` -> ``BLOCK`` (divides by the padded length, strides
    rows by BLOCK) and ``BLOCK`` -> ``N`` outside shape positions."""
    if not isinstance(node, ast.Name) or not isinstance(node.ctx, ast.Load):
        return
    pairs = scope.size_to_block
    if node.id in pairs:
        yield ast.Name(id=pairs[node.id], ctx=ast.Load())
    blocks = {b: s for s, b in pairs.items()}
    if node.id in blocks and not scope.inside_call(node, SHAPE_CALLS):
        yield ast.Name(id=blocks[node.id], ctx=ast.Load())


def mask_lt_to_le(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``<`` -> ``<=`` in a bound check: one lane past the end is let through."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Lt):
        yield ast.Compare(left=copy.deepcopy(node.left), ops=[ast.LtE()], comparators=copy.deepcopy(node.comparators))


def drop_mask(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """A load, store or atomic without its mask (and without ``other``, which needs a mask)."""
    if _is_tl_call(node, *MEMORY_CALLS) and _keyword(node, "mask") is not None:
        new = copy.deepcopy(node)
        new.keywords = [k for k in new.keywords if k.arg not in ("mask", "other")]
        yield new


def other_zero_to_one(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``other=0`` -> ``other=1``: masked-off lanes read 1 and leak into reductions."""
    if not _is_tl_call(node, "load"):
        return
    other = _keyword(node, "other")
    if other is not None and isinstance(other.value, ast.Constant) and other.value.value == 0:
        new = copy.deepcopy(node)
        _keyword(new, "other").value = ast.Constant(value=1.0)
        yield new


def sum_to_max(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``tl.sum`` -> ``tl.max``: the wrong reduction."""
    if _is_tl_call(node, "sum"):
        new = copy.deepcopy(node)
        new.func = _tl("max")
        yield new


def sum_to_mean(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``tl.sum(a, axis=k)`` -> ``tl.sum(a, axis=k) / a.shape[k]``: a mean where a sum belongs."""
    if not _is_tl_call(node, "sum") or not node.args:
        return
    axis = node.args[1] if len(node.args) > 1 else getattr(_keyword(node, "axis"), "value", None)
    if not (isinstance(axis, ast.Constant) and isinstance(axis.value, int)):
        return
    length = ast.Subscript(
        value=ast.Attribute(value=copy.deepcopy(node.args[0]), attr="shape", ctx=ast.Load()),
        slice=ast.Constant(value=axis.value),
        ctx=ast.Load(),
    )
    yield ast.BinOp(left=copy.deepcopy(node), op=ast.Div(), right=length)


def drop_upcast(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``v.to(tl.float32)`` -> ``v``: arithmetic in the storage precision."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "to"
        and node.args
        and isinstance(node.args[0], ast.Attribute)
        and node.args[0].attr == "float32"
    ):
        yield copy.deepcopy(node.func.value)


def add_sub_swap(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``+`` <-> ``-`` (also in ``+=``)."""
    swap = {ast.Add: ast.Sub, ast.Sub: ast.Add}
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in swap:
        new = copy.deepcopy(node)
        new.op = swap[type(node.op)]()
        yield new


def mul_div_swap(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``*`` <-> ``/`` on values (pointer offsets are left to the stride operators)."""
    swap = {ast.Mult: ast.Div, ast.Div: ast.Mult}
    if isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in swap:
        if any(n.startswith("stride") for n in _names_in(node)) and isinstance(node.op, ast.Mult):
            return
        new = copy.deepcopy(node)
        new.op = swap[type(node.op)]()
        yield new


def constant_perturb(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """A numeric literal c -> c + 1 (0.5 -> 1.5, 0 -> 1): off-by-one starts, wrong scales."""
    if not isinstance(node, ast.Constant) or isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
        return
    call, keyword = scope.enclosing_call(node)
    if keyword in ("other", "axis", "num_warps", "eviction_policy"):
        return  # other has its own operator; an axis change is a different bug class
    if call is not None and call_name(call) in SHAPE_CALLS:
        return  # shape arguments and program ids: incompetent or covered by program_id_swap
    if call is not None and call_name(call) in REDUCTION_CALLS and keyword is None and node is not call.args[0]:
        return  # the positional axis of a reduction
    yield ast.Constant(value=node.value + 1)


def stride_change(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """A stride replaced by 1 (contiguity assumed) or by the tensor's other stride (transposed)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id.startswith("stride") and node.id in scope.params:
        yield ast.Constant(value=1)
        partner = scope.stride_partner.get(node.id)
        if partner:
            yield ast.Name(id=partner, ctx=ast.Load())


def drop_offset_term(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``PTR + row * stride + cols`` loses its row (or column) offset term."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add)):
        return
    for kept, dropped in ((node.left, node.right), (node.right, node.left)):
        if isinstance(dropped, ast.BinOp) and isinstance(dropped.op, ast.Mult):
            names = _names_in(dropped)
            if any(n.startswith("stride") for n in names) or names & set(scope.size_to_block):
                yield copy.deepcopy(kept)


def loop_bound(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``range(a, b)`` -> ``range(a, b + 1)`` and ``range(a, b - 1)``: one iteration too many or few."""
    if call_name(node) not in LOOP_CALLS or not node.args or len(node.args) > 3:
        return
    end = 0 if len(node.args) == 1 else 1
    for op in (ast.Add(), ast.Sub()):
        new = copy.deepcopy(node)
        new.args[end] = ast.BinOp(left=new.args[end], op=op, right=ast.Constant(value=1))
        yield new


def atomic_to_rmw(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``tl.atomic_add(p, v, mask=m)`` -> ``tl.store(p, tl.load(p, mask=m) + v, mask=m)``: a racy
    read-modify-write (only a GPU run can show it; the interpreter runs programs in turn)."""
    if not (isinstance(node, ast.Expr) and _is_tl_call(node.value, "atomic_add")):
        return
    call = node.value
    pointer = call.args[0] if call.args else getattr(_keyword(call, "pointer"), "value", None)
    value = call.args[1] if len(call.args) > 1 else getattr(_keyword(call, "val"), "value", None)
    if pointer is None or value is None:
        return
    mask = call.args[2] if len(call.args) > 2 else getattr(_keyword(call, "mask"), "value", None)
    masked = [ast.keyword(arg="mask", value=copy.deepcopy(mask))] if mask is not None else []
    load = ast.Call(func=_tl("load"), args=[copy.deepcopy(pointer)], keywords=list(masked))
    total = ast.BinOp(left=load, op=ast.Add(), right=copy.deepcopy(value))
    store = ast.Call(func=_tl("store"), args=[copy.deepcopy(pointer), total], keywords=copy.deepcopy(masked))
    yield ast.Expr(value=store)


def program_id_swap(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``tl.program_id(0)`` <-> ``tl.program_id(1)``: the grid axes confused."""
    if not _is_tl_call(node, "program_id"):
        return
    axis = node.args[0] if node.args else getattr(_keyword(node, "axis"), "value", None)
    if isinstance(axis, ast.Constant) and axis.value in (0, 1, 2):
        yield ast.Call(func=_tl("program_id"), args=[ast.Constant(value=1 if axis.value == 0 else 0)], keywords=[])


# --- GPU and softmax-family bug classes ------------------------------------------------------

LOG2E = 1.4426950408889634  # log2(e): exp(x) == exp2(x * LOG2E)


def drop_barrier(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``tl.debug_barrier()`` deleted (``pass`` keeps a one-statement block valid): warps that
    read a tile can race with warps that overwrite it in place. Only a GPU can show it: the
    interpreter runs each program as one sequential thread."""
    if isinstance(node, ast.Expr) and _is_tl_call(node.value, "debug_barrier"):
        yield ast.Pass()


def drop_int64_cast(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``x.to(tl.int64)`` / ``tl.cast(x, tl.int64)`` -> ``x``: an offset computed in int32
    overflows once row * stride passes 2**31 elements (Liger-Kernel #251, #803). Only the CUDA
    floor's index-width cases show it (harness.ops.layouts: one input with a row or column stride
    just under 2**31); the interpreter's CPU-sized inputs stay far below 2**31."""
    if not isinstance(node, ast.Call):
        return
    if isinstance(node.func, ast.Attribute) and node.func.attr == "to":
        dtype = node.args[0] if node.args else getattr(_keyword(node, "dtype"), "value", None)
        if _is_tl_attr(dtype, "int64"):
            yield copy.deepcopy(node.func.value)
    elif _is_tl_call(node, "cast") and node.args:
        dtype = node.args[1] if len(node.args) > 1 else getattr(_keyword(node, "dtype"), "value", None)
        if _is_tl_attr(dtype, "int64"):
            yield copy.deepcopy(node.args[0])


def other_neg_inf_to_zero(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``tl.load(..., other=-inf)`` -> ``other=0.0``: masked-off lanes read 0 instead of the
    identity of max, so a row max of negative values becomes 0 and a softmax denominator gains
    exp(0 - m) per padding lane."""
    if not _is_tl_call(node, "load"):
        return
    other = _keyword(node, "other")
    if other is not None and _is_neg_inf(other.value):
        new = copy.deepcopy(node)
        _keyword(new, "other").value = ast.Constant(value=0.0)
        yield new


def reduction_axis_swap(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``axis=0`` <-> ``axis=1`` in a reduction (keyword or positional second argument): a
    row reduction becomes a column reduction. On a 1-D operand the swap does not compile
    (the campaign reports it incompetent); rank is not known from the syntax alone."""
    if not (_is_tl_call(node, *REDUCTION_CALLS) and node.args):
        return
    new = copy.deepcopy(node)
    if len(node.args) > 1:
        axis = new.args[1]
    else:
        keyword = _keyword(new, "axis")
        axis = keyword.value if keyword is not None else None
    if isinstance(axis, ast.Constant) and not isinstance(axis.value, bool) and axis.value in (0, 1):
        axis.value = 1 - axis.value
        yield new


def where_branch_swap(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``tl.where(c, a, b)`` -> ``tl.where(c, b, a)``: the condition read the wrong way round
    (e.g. the padding value kept and the data masked)."""
    if not _is_tl_call(node, "where"):
        return
    new = copy.deepcopy(node)
    if len(new.args) == 3:
        new.args[1], new.args[2] = new.args[2], new.args[1]
        yield new
    elif len(new.args) == 1 and _keyword(new, "x") is not None and _keyword(new, "y") is not None:
        _keyword(new, "x").arg, _keyword(new, "y").arg = "y", "x"
        yield new


def mask_and_to_or(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``&`` -> ``|`` between masks (comparisons, mask names, their broadcasts): a lane is let
    through when any bound holds instead of all (a 2-D tile reads past the row or column end)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        if _is_mask_like(node.left) and _is_mask_like(node.right):
            yield ast.BinOp(left=copy.deepcopy(node.left), op=ast.BitOr(), right=copy.deepcopy(node.right))
    elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.BitAnd) and _is_mask_like(node.value):
        new = copy.deepcopy(node)
        new.op = ast.BitOr()
        yield new


def exp2_drop_log2e(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``x * LOG2E`` -> ``x`` (a literal near log2(e), or a name containing log2e): exp2 computes
    2**x, so ``tl.exp2(x * LOG2E)`` is exp(x) and without the factor a softmax or logsumexp
    uses base 2. Applies to any product, so a scale premultiplied by LOG2E is covered too."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        if _is_log2e(node.right):
            yield copy.deepcopy(node.left)
        elif _is_log2e(node.left):
            yield copy.deepcopy(node.right)


def _is_tl_attr(node: ast.AST | None, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) and node.value.id == "tl"


def _is_inf(node: ast.AST, sign: str) -> bool:
    """``float("inf")``, ``float("-inf")``, ``math.inf``, ``-inf``-like spellings of +/-infinity."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        flipped = "-" if sign == "+" else "+"
        return _is_inf(node.operand, flipped if isinstance(node.op, ast.USub) else sign)
    if isinstance(node, ast.Constant) and isinstance(node.value, float):
        return node.value == (float("inf") if sign == "+" else float("-inf"))
    if call_name(node) == "float" and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
        text = str(node.args[0].value).strip().lower()
        if text.lstrip("+-") in ("inf", "infinity"):
            return (sign == "-") == text.startswith("-")
    if isinstance(node, (ast.Name, ast.Attribute)):
        name = (node.id if isinstance(node, ast.Name) else node.attr).lower()
        if name in ("inf", "infinity"):
            return sign == "+"
        if name.replace("_", "") in ("neginf", "minusinf", "neginfinity"):
            return sign == "-"
    return False


def _is_neg_inf(node: ast.AST) -> bool:
    return _is_inf(node, "-")


def _is_log2e(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, float):
        return abs(node.value - LOG2E) < 1e-6
    if isinstance(node, (ast.Name, ast.Attribute)):
        return "log2e" in (node.id if isinstance(node, ast.Name) else node.attr).lower()
    return False


def _is_mask_like(node: ast.AST) -> bool:
    """A boolean tile by its syntax: a comparison, a name (masks are named), a broadcast or
    combination of those; never a literal (``x & 0xFF`` is integer arithmetic)."""
    if isinstance(node, (ast.Compare, ast.Name)):
        return True
    if isinstance(node, ast.Subscript):
        return _is_mask_like(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
        return _is_mask_like(node.left) and _is_mask_like(node.right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.Not)):
        return _is_mask_like(node.operand)
    return False


# --- host code: the launches of a wrapper ---------------------------------------------------------


def stride_swap(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """At a kernel launch, a stride of one input passed for another's of the same rank (both
    parameters of the wrapper): ``x.stride(0)`` -> ``residual.stride(0)``, ``*k.stride()`` ->
    ``*v.stride()``. The kernel then reads one tensor with another's strides, which only a case
    that gives the two different strides shows (harness.ops.apart). A launch is ``K[grid](...)``
    or ``helper(K, grid, ...)`` for a jit function K of the module. Ranks: an input's ``.stride(d)``
    arguments name its dims; a ``*t.stride()`` takes as many of the kernel's parameters as the run
    of them sharing a name but for the last letter (stride_xm, stride_xn), and none is generated
    when the kernel's parameters cannot be matched to the launch's arguments that way."""
    launch = scope.parent(node)
    stride = _stride_of(node)
    if stride is None or not isinstance(launch, ast.Call) or node not in (_launch_args(launch, scope) or ()):
        return
    tensor, dim = stride
    ranks = _launch_ranks(launch, scope)
    if tensor not in scope.params or tensor not in ranks:
        return
    for other, rank in ranks.items():
        if other != tensor and other in scope.params and rank == ranks[tensor]:
            call = ast.Call(func=ast.Attribute(value=ast.Name(id=other, ctx=ast.Load()), attr="stride", ctx=ast.Load()),
                            args=[] if dim is None else [copy.deepcopy(node.args[0])], keywords=[])
            yield ast.Starred(value=call, ctx=ast.Load()) if dim is None else call


def drop_contiguous(node: ast.AST, scope: Scope) -> Iterator[ast.AST]:
    """``x.contiguous()`` -> ``x`` for an input x of the wrapper (a parameter): a kernel that
    assumes the copy's strides (a unit-stride last dim, or another input's row stride) gets the
    caller's view."""
    if (call_name(node) == "contiguous" and not node.args and not node.keywords
            and isinstance(node.func.value, ast.Name) and node.func.value.id in scope.params):
        yield ast.Name(id=node.func.value.id, ctx=ast.Load())


def _launch_args(call: ast.Call, scope: Scope) -> list[ast.expr] | None:
    """The kernel arguments of a launch (``K[grid](*args)``, ``helper(K, grid, *args)``); None
    for another call."""
    if isinstance(call.func, ast.Subscript):
        return call.args
    if len(call.args) > 1 and isinstance(call.args[0], ast.Name) and call.args[0].id in scope.kernels:
        return call.args[2:]
    return None


def _launched(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Subscript):
        return call.func.value.id if isinstance(call.func.value, ast.Name) else None
    return call.args[0].id


def _stride_of(node: ast.AST) -> tuple[str, str | None] | None:
    """``t.stride(d)`` -> (t, d as written); ``*t.stride()`` -> (t, None); else None."""
    star = isinstance(node, ast.Starred)
    call = node.value if star else node
    if not (call_name(call) == "stride" and isinstance(call.func.value, ast.Name) and not call.keywords):
        return None
    if star and not call.args:
        return call.func.value.id, None
    if not star and len(call.args) == 1 and isinstance(_literal(call.args[0]), int):
        return call.func.value.id, ast.unparse(call.args[0])
    return None


def _literal(node: ast.AST):
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        return -value if isinstance(value, int) else None
    return node.value if isinstance(node, ast.Constant) and not isinstance(node.value, bool) else None


def _launch_ranks(call: ast.Call, scope: Scope) -> dict[str, object]:
    """Each tensor whose strides the launch passes -> its rank: the set of dims of its
    ``.stride(d)`` arguments, or the count a ``*t.stride()`` expands to (``stride_swap``)."""
    args = _launch_args(call, scope) or []
    ranks: dict[str, object] = {}
    for a in args:
        stride = _stride_of(a)
        if stride is not None and stride[1] is not None:
            ranks.setdefault(stride[0], set()).add(stride[1])
    ranks = {t: frozenset(d) for t, d in ranks.items()}
    params = scope.kernels.get(_launched(call) or "")
    if params is None:
        return ranks
    keywords = {k.arg for k in call.keywords}
    positional = [p for p in params if p not in keywords]
    i, stars = 0, {}
    for a in args:
        if isinstance(a, ast.Starred):
            stride = _stride_of(a)
            if stride is None or i >= len(positional):
                return ranks
            run = 1
            while i + run < len(positional) and positional[i + run][:-1] == positional[i][:-1]:
                run += 1
            stars[stride[0]] = run
            i += run
        else:
            i += 1
    return {**ranks, **stars} if i == len(positional) else ranks


# The table: name -> generator. Order matters only for naming (it is part of the mutant name).
OPERATORS: dict[str, Operator] = {
    "size_block_swap": size_block_swap,
    "mask_lt_to_le": mask_lt_to_le,
    "drop_mask": drop_mask,
    "other_zero_to_one": other_zero_to_one,
    "sum_to_max": sum_to_max,
    "sum_to_mean": sum_to_mean,
    "drop_upcast": drop_upcast,
    "add_sub_swap": add_sub_swap,
    "mul_div_swap": mul_div_swap,
    "constant_perturb": constant_perturb,
    "stride_change": stride_change,
    "drop_offset_term": drop_offset_term,
    "loop_bound": loop_bound,
    "atomic_to_rmw": atomic_to_rmw,
    "program_id_swap": program_id_swap,
    "drop_barrier": drop_barrier,
    "drop_int64_cast": drop_int64_cast,
    "other_neg_inf_to_zero": other_neg_inf_to_zero,
    "reduction_axis_swap": reduction_axis_swap,
    "where_branch_swap": where_branch_swap,
    "mask_and_to_or": mask_and_to_or,
    "exp2_drop_log2e": exp2_drop_log2e,
}

# The host code's table (mutagen applies it to a kernel module's top-level functions that are not jit).
HOST_OPERATORS: dict[str, Operator] = {
    "stride_swap": stride_swap,
    "drop_contiguous": drop_contiguous,
}

# Operators whose bugs only some backends can show: their generated mutants carry these
# backends in their meta, and a campaign elsewhere lists them apart (campaign.observable_on)
# instead of counting them as survivors.
BACKENDS: dict[str, tuple[str, ...]] = {
    "drop_barrier": ("cuda",),  # a race between warps; the interpreter runs a program sequentially
    # int32 offsets overflow only past 2**31 elements: the CUDA floor's index-width cases reach
    # that (harness.ops.layouts), the interpreter's never do (a storage of 2**31 elements is GBs)
    "drop_int64_cast": ("cuda",),
}
