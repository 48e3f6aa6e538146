"""Ops, kernels and mutants. Decorators only record metadata; the registry collects it.

Data flow of the harness: registry -> cases -> run -> compare -> record -> report.
This module is the first step: it knows *what* can be verified, nothing about how.

Length (over 400 lines): most of it is ``Contract``, each field validated where it is declared with
the fix in its message; the registry and the decorators that fill it are short.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import inspect
from typing import Any, Callable, Iterable, Sequence

import torch

from harness.errors import RegistryError
from vocabulary import RUN_ENDS, EntryKind, Origin
from harness.registry import discovery, kernel_signature

UPSTREAM = "upstream"  # the name a per-tensor contract field gives the upstream gradient


@dataclasses.dataclass(frozen=True)
class Contract:
    """The inputs a kernel promises to handle. ``None`` means no limit.

    ``dtypes`` bounds the dtype of the first input, ``max_n`` its last dimension,
    ``contiguous=True`` puts non-contiguous tensor inputs outside the contract.
    ``deterministic=False`` lets two identical runs differ (atomics): the
    ``repeatable`` check then reports the difference without failing, as long as
    the second run also matches the oracle within the same tolerances.
    ``waive={check: reason}`` declares a deliberate deviation (Liger-Kernel returns 0 where
    torch returns NaN when every row is ignored): failures of that check are reported as
    ``waived`` with the reason, never as passed or failed; a waiver whose check no longer fails
    is reported as stale. Keys are the op's check names (checked at registration).
    ``precision="input"`` declares that the kernel rounds intermediate results (logits, a
    normalised row) to its fp16/bf16 input dtype by design, as Liger-Kernel's fused linear
    cross-entropy does with its logits: its fp16/bf16 value checks then allow
    ``DECLARED_ULPS`` roundings of the input dtype on the terms each formula sums or cancels
    (harness.compare.tolerances.declared_precision), and every such record says so; the
    default ``"float32"`` holds the kernel to the op's error model for fp32 intermediates.
    ``precision=(DTYPE, N)`` declares that the kernel's DTYPE arithmetic ("float32", "float16",
    "bfloat16") loses up to N roundings of DTYPE on the terms, on every case, e.g.
    ``("float32", 64)`` for a softmax computed in fp32 as exp(x - logsumexp(x)); each record it
    widens says so (``declared_precision``). ``("tfloat32", N)``: N TF32 roundings (2^-11 each) on
    the fp32 cases, for products taken in TF32 (a GPU's default tl.dot on fp32), e.g.
    ``("tfloat32", 2)``: a and b.
    ``precision={check: precision}`` declares it per value check (the op's check names, e.g.
    ``{"dx": "input", "dweight": "input"}`` for a kernel that keeps only its gradients' G in the
    input dtype); a check not named is held to the op's model ("float32").
    ``rule``: a function of the kernel's arguments that returns why they fall outside the
    contract (a string), or None inside it, for limits the fields above cannot say (``V >= 2``).
    ``forward_only=True``: an inference kernel; no gradient is asked of it, every gradient-free
    check still runs, and its verdict is "pass (forward only)".
    ``inplace={output: buffer}``: the kernel writes that output (the forward's, or a gradient
    ``d<input>``) into that input buffer (an input's name, or ``dy``/``upstream``) by design; the
    buffer is judged as the output, every other input must stay unchanged (harness.registry.inplace
    checks the names against the op at registration).
    ``contiguous=("x", "upstream")``: only the named inputs (``upstream``: the upstream
    gradient) must be contiguous; ``unit_stride=("x",)``: the named inputs' last dim must have
    stride 1 (a last dim of size 1 has any stride). ``max_leading_dims=1``: the first tensor
    input has at most that many dims before its last (x[M, N] only; 2 takes x[B, S, N]).
    ``self_limits=True``: the kernel states further limits itself, by raising ValueError,
    TypeError, NotImplementedError or AssertionError before it launches anything, its inputs
    unchanged; such a case is out of contract for it (harness.run.runner), listed in the report.
    """

    dtypes: tuple[torch.dtype, ...] | None = None
    max_n: int | None = None
    contiguous: bool | tuple[str, ...] = False
    deterministic: bool = True
    waive: dict[str, str] = dataclasses.field(default_factory=dict, hash=False)
    precision: str | tuple[str, float] | dict = dataclasses.field(default="float32", hash=False)
    # repr=False: a function's repr holds its address, which would change every key of the
    # incremental store; the rule's source is in the key through the module that defines it
    rule: Callable[..., str | None] | None = dataclasses.field(default=None, repr=False, compare=False)
    forward_only: bool = False
    inplace: dict[str, str] = dataclasses.field(default_factory=dict, hash=False)
    unit_stride: tuple[str, ...] = ()
    max_leading_dims: int | None = None
    self_limits: bool = False

    def __post_init__(self) -> None:
        for field in ("contiguous", "unit_stride"):
            value = getattr(self, field)
            value = (value,) if isinstance(value, str) else value
            if isinstance(value, bool) and field == "contiguous":
                continue
            if not (isinstance(value, (tuple, list)) and all(isinstance(n, str) and n for n in value)):
                raise RegistryError(f"Contract({field}=...) takes a tuple of input names (\"upstream\": the upstream "
                                    f"gradient){', or True: every tensor input' if field == 'contiguous' else ''}; "
                                    f"got {value!r}; write e.g. {field}=(\"x\",)")
            object.__setattr__(self, field, tuple(value))
        m = self.max_leading_dims
        if m is not None and (not isinstance(m, int) or isinstance(m, bool) or m < 0):
            raise RegistryError(f"Contract(max_leading_dims=...) must be an int >= 0 or None, got {m!r}; "
                                "1 takes x[M, N] only")
        if not isinstance(self.self_limits, bool):
            raise RegistryError(f"Contract(self_limits=...) is True or False, got {self.self_limits!r}")
        if self.dtypes is not None:
            dtypes = tuple(self.dtypes) if not isinstance(self.dtypes, torch.dtype) else (self.dtypes,)
            bad = [d for d in dtypes if not isinstance(d, torch.dtype)]
            if bad or not dtypes:
                raise RegistryError(
                    f"Contract(dtypes=...) takes a non-empty tuple of torch dtypes, got {self.dtypes!r}; "
                    "write e.g. dtypes=(torch.float32, torch.float16)"
                )
            object.__setattr__(self, "dtypes", dtypes)
        if self.max_n is not None and (not isinstance(self.max_n, int) or isinstance(self.max_n, bool) or self.max_n < 1):
            raise RegistryError(f"Contract(max_n=...) must be a positive int or None, got {self.max_n!r}")
        waive = self.waive if self.waive is not None else {}
        if not isinstance(waive, dict) or not all(isinstance(k, str) and isinstance(v, str) and v.strip()
                                                  for k, v in waive.items()):
            raise RegistryError(
                f"Contract(waive=...) takes a dict of check name -> reason (non-empty strings), got {self.waive!r}; "
                "write e.g. waive={'all_ignored': 'returns 0 by design'}"
            )
        ends = sorted(set(waive) & RUN_ENDS)
        if ends:
            raise RegistryError(
                f"Contract(waive=...) cannot waive {', '.join(ends)}: that is how a case's run ended (the harness's "
                "finding, not a value the kernel chose), and waiving it would pass a kernel that crashed or hung; "
                "fix the kernel, or narrow its Contract so the case is out of contract"
            )
        object.__setattr__(self, "waive", dict(waive))
        object.__setattr__(self, "precision", _precision(self.precision))
        if not isinstance(self.forward_only, bool):
            raise RegistryError(f"Contract(forward_only=...) is True (an inference kernel: no gradient is asked of it) "
                                f"or False, got {self.forward_only!r}")
        inplace = self.inplace if self.inplace is not None else {}
        if not isinstance(inplace, dict) or not all(isinstance(k, str) and k and isinstance(v, str) and v
                                                    for k, v in inplace.items()):
            raise RegistryError(
                f"Contract(inplace=...) takes a dict of output name -> the input buffer it is written into (non-empty "
                f"strings), got {self.inplace!r}; write e.g. inplace={{'dx': 'dy'}} (dx written into the upstream "
                "gradient) or inplace={'y': 'x'} (the forward written into x)")
        object.__setattr__(self, "inplace", dict(inplace))
        if self.rule is not None and not callable(self.rule):
            raise RegistryError(f"Contract(rule=...) takes a function of the kernel's arguments returning why they are "
                                f"outside the contract (a string) or None, got {self.rule!r}")

    def named(self) -> tuple[str, ...]:
        """The input names the per-tensor fields hold (checked against the op's at registration)."""
        return (self.contiguous if isinstance(self.contiguous, tuple) else ()) + self.unit_stride

    def violations(self, args: Iterable[Any], names: Sequence[str] = (), upstream: Any = None) -> list[str]:
        """Why these kernel arguments fall outside the contract (empty list: inside). ``names``:
        the op's input names in argument order; ``upstream``: the upstream gradient."""
        args = tuple(args)
        reasons = self.rule_violations(args) + self.tensor_violations(args, names, upstream)
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors:
            return reasons
        first = tensors[0]
        if self.max_leading_dims is not None and first.dim() - 1 > self.max_leading_dims:
            reasons.append(f"{first.dim() - 1} leading dims (shape {tuple(first.shape)}) > "
                           f"max_leading_dims={self.max_leading_dims}")
        if self.dtypes is not None and first.dtype not in self.dtypes:
            names = ", ".join(str(d).removeprefix("torch.") for d in self.dtypes)
            reasons.append(f"dtype {str(first.dtype).removeprefix('torch.')} not in ({names})")
        if self.max_n is not None and first.dim() > 0 and first.shape[-1] > self.max_n:
            reasons.append(f"last dimension {first.shape[-1]} > max_n={self.max_n}")
        if self.contiguous is True:
            strided = [i for i, t in enumerate(tensors) if not t.is_contiguous()]
            if strided:
                reasons.append(f"non-contiguous tensor input(s) at position(s) {strided} with contiguous=True")
        return reasons

    def tensor_violations(self, args: tuple, names: Sequence[str], upstream: Any) -> list[str]:
        """What ``contiguous=(names)`` and ``unit_stride=(names)`` say of these tensors."""
        by_name = dict(zip(names, args), **({UPSTREAM: upstream} if upstream is not None else {}))
        reasons = []
        for name in self.contiguous if isinstance(self.contiguous, tuple) else ():
            t = by_name.get(name)
            if isinstance(t, torch.Tensor) and not t.is_contiguous():
                reasons.append(f"{name} non-contiguous (strides {t.stride()}) with contiguous=({name!r},)")
        for name in self.unit_stride:
            t = by_name.get(name)
            if isinstance(t, torch.Tensor) and t.dim() and t.shape[-1] > 1 and t.stride(-1) != 1:
                reasons.append(f"{name} last-dim stride {t.stride(-1)} with unit_stride=({name!r},)")
        return reasons

    def rule_name(self) -> str:
        return _rule_name(self.rule)

    def rule_violations(self, args: tuple) -> list[str]:
        """What ``rule`` says of these arguments, as reasons (a broken rule: RegistryError)."""
        why = self.rule_reason(args)
        return [f"{why} (rule {_rule_name(self.rule)})"] if why else []

    def rule_reason(self, args: tuple) -> str | None:
        """``rule(*args)``, checked: a non-empty string or None."""
        if self.rule is None:
            return None
        name = _rule_name(self.rule)
        try:
            why = self.rule(*args)
        except RegistryError:
            raise
        except Exception as exc:  # a broken rule is the plugin's error, said in one line
            raise RegistryError(f"Contract(rule={name}) raised {type(exc).__name__}: {exc}") from None
        if why is not None and (not isinstance(why, str) or not why.strip()):
            raise RegistryError(f"Contract(rule={name}) returned {why!r}; it must return None "
                                "(inside the contract) or a non-empty string saying why not")
        return why or None

    def describe(self) -> str:
        parts = []
        if self.dtypes is not None:
            parts.append("dtypes=" + "/".join(str(d).removeprefix("torch.") for d in self.dtypes))
        if self.max_n is not None:
            parts.append(f"max_n={self.max_n}")
        if self.contiguous is True:
            parts.append("contiguous")
        elif self.contiguous:
            parts.append("contiguous " + "/".join(self.contiguous))
        if self.unit_stride:
            parts.append("unit stride " + "/".join(self.unit_stride))
        if self.max_leading_dims is not None:
            parts.append(f"max_leading_dims={self.max_leading_dims}")
        if self.self_limits:
            parts.append("self_limits")
        if not self.deterministic:
            parts.append("nondeterministic")
        if self.waive:
            parts.append("waives " + "/".join(sorted(self.waive)))
        if self.precision != "float32":
            parts.append(f"precision={self.precision}")
        if self.rule is not None:
            parts.append(f"rule {_rule_name(self.rule)}")
        if self.forward_only:
            parts.append("forward only")
        if self.inplace:
            parts.append("in place " + "/".join(f"{k}->{v}" for k, v in sorted(self.inplace.items())))
        return ", ".join(parts) or "unrestricted"


PRECISIONS = ("float32", "input")


def _precision(value) -> str | tuple[str, float] | dict:
    """A checked ``Contract(precision=...)``: one of PRECISIONS, or (dtype name, roundings), or a
    dict of check name -> either (sorted by name: its repr is part of the incremental store's keys)."""
    from harness.compare.tolerances import MAX_DECLARED_ROUNDINGS, PRECISION_DTYPES

    if isinstance(value, dict):
        if not all(isinstance(k, str) and k and not isinstance(v, dict) for k, v in value.items()):
            raise RegistryError("Contract(precision={check: precision}) takes the op's check names as keys and, as "
                                f"values, what precision=... takes for one check; got {value!r}")
        return {k: _precision(value[k]) for k in sorted(value)}
    if isinstance(value, str) and value in PRECISIONS:
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2 and value[0] in PRECISION_DTYPES \
            and isinstance(value[1], (int, float)) and not isinstance(value[1], bool) \
            and 0 < value[1] <= MAX_DECLARED_ROUNDINGS:
        return (str(value[0]), value[1])
    raise RegistryError(
        f"Contract(precision=...) is {' or '.join(map(repr, PRECISIONS))}, or (dtype, roundings) with dtype one of "
        f"{', '.join(map(repr, PRECISION_DTYPES))} and 0 < roundings <= {MAX_DECLARED_ROUNDINGS:g}; got {value!r}. "
        "'input' declares intermediates rounded to the fp16/bf16 input dtype by design; ('float32', 64) allows an fp32 "
        "kernel 64 fp32 roundings of the terms (exp(x - logsumexp(x)), say)")


def _rule_name(rule: Callable[..., Any]) -> str:
    return getattr(rule, "__qualname__", None) or getattr(rule, "__name__", None) or type(rule).__name__


@dataclasses.dataclass(frozen=True)
class KernelEntry:
    """One registered implementation of an op: a kernel under test or a mutant."""

    op: str
    name: str
    fn: Callable[..., Any]
    contract: Contract
    kind: EntryKind  # a string naming one is read as that EntryKind
    origin: Origin  # a string naming one is read as that Origin
    defined_at: str  # file:line of the definition, for error messages
    plugin: str | None = None  # plugin file that registered it, for repro commands
    description: str = ""
    meta: dict = dataclasses.field(default_factory=dict)  # mutants: operator, location, diff

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", EntryKind(self.kind))
        if not isinstance(self.origin, Origin):
            try:
                object.__setattr__(self, "origin", Origin(self.origin))
            except ValueError:
                known = ", ".join(o.value for o in Origin)
                raise RegistryError(f"{self.kind} {self.name!r}: unknown origin {self.origin!r}; one of {known}") from None


class Registry:
    """Holds the ops (their specs), and the kernels and mutants registered for them."""

    def __init__(self) -> None:
        self.ops: dict[str, Any] = {}
        self.entries: dict[tuple[str, str], KernelEntry] = {}
        self._loading_plugin: str | None = None
        self._captured: list[KernelEntry] | None = None
        self._keeping_ops = False

    # --- ops -------------------------------------------------------------------------
    def add_op(self, spec: Any) -> Any:
        name = getattr(spec, "name", None)
        if not isinstance(name, str) or not name:
            raise RegistryError(f"an op spec needs a non-empty string 'name', got {name!r}")
        if name in self.ops and self._keeping_ops:
            return self.ops[name]
        if name in self.ops and _identity(self.ops[name]) != _identity(spec):
            raise RegistryError(f"op {name!r} is registered twice: {_origin(self.ops[name])} and {_origin(spec)}")
        self.ops[name] = spec
        return spec

    def op(self, name: str) -> Any:
        load_builtin_ops()
        if name not in self.ops:
            raise RegistryError(f"unknown op {name!r}; known ops: {', '.join(sorted(self.ops)) or 'none'}")
        return self.ops[name]

    # --- kernels and mutants ---------------------------------------------------------
    def add(self, entry: KernelEntry) -> KernelEntry:
        if self._captured is not None:
            self._captured.append(entry)
            return entry
        load_builtin_ops()
        if entry.op not in self.ops:
            raise RegistryError(
                f"{entry.kind} {entry.name!r} ({entry.defined_at}) names unknown op {entry.op!r}; "
                f"known ops: {', '.join(sorted(self.ops))}"
            )
        per_check = entry.contract.precision if isinstance(entry.contract.precision, dict) else {}
        for field, names in (("waives", entry.contract.waive), ("declares the precision of", per_check)):
            unknown = sorted(set(names) - set(self.ops[entry.op].check_names()))
            if unknown:
                raise RegistryError(
                    f"{entry.kind} {entry.name!r} ({entry.defined_at}) {field} unknown check(s) {', '.join(unknown)} of "
                    f"op {entry.op!r}; known checks: {', '.join(self.ops[entry.op].check_names())}"
                )
        from harness.registry import inplace

        inplace.validate(entry, self.ops[entry.op])
        check_names(entry.contract, self.ops[entry.op], f"{entry.kind} {entry.name!r} ({entry.defined_at})")
        kernel_signature.validate(entry, self.ops[entry.op])
        key = (entry.op, entry.name)
        if key in self.entries:
            old = self.entries[key]
            if old.defined_at == entry.defined_at and old.origin == entry.origin:
                self.entries[key] = entry  # the same definition imported twice
                return entry
            raise RegistryError(
                f"duplicate name {entry.name!r} for op {entry.op!r}: defined at {old.defined_at} "
                f"({old.kind}) and at {entry.defined_at} ({entry.kind}); give one of them another name=..."
            )
        self.entries[key] = entry
        return entry

    def add_described(self, entry: KernelEntry) -> KernelEntry:
        """An entry registered in another process and checked there (harness.registry.catalog):
        the deciding process's view of it, with no function to call."""
        self.entries[(entry.op, entry.name)] = entry
        return entry

    @contextlib.contextmanager
    def capturing(self):
        """Collect the entries registered inside the block instead of adding them (used to
        re-execute a kernel module's source, e.g. a generated mutant, without duplicates)."""
        previous, self._captured = self._captured, []
        try:
            yield self._captured
        finally:
            self._captured = previous

    @contextlib.contextmanager
    def keeping_ops(self):
        """Inside the block an op declared again keeps its first declaration (a base revision's
        plugin re-declares the op: the contract verified is the working tree's)."""
        previous, self._keeping_ops = self._keeping_ops, True
        try:
            yield
        finally:
            self._keeping_ops = previous

    def select(self, *, op: str | None = None, kind: EntryKind = EntryKind.KERNEL, pattern: str = "*") -> list[KernelEntry]:
        """Entries of one kind, filtered by op and by a glob on their names (several globs
        separated by commas: any may match), in a stable order."""
        globs = [g.strip() for g in pattern.split(",") if g.strip()] or ["*"]
        return sorted(
            (
                e
                for e in self.entries.values()
                if e.kind == kind and (op is None or e.op == op) and any(fnmatch.fnmatchcase(e.name, g) for g in globs)
            ),
            key=lambda e: (e.op, e.name),
        )

    def get(self, op: str, name: str) -> KernelEntry:
        try:
            return self.entries[(op, name)]
        except KeyError:
            known = ", ".join(sorted(n for (o, n) in self.entries if o == op)) or "none"
            raise RegistryError(f"no kernel or mutant named {name!r} for op {op!r}; registered: {known}") from None


REGISTRY = Registry()


def check_names(contract: Contract, spec: Any, who: str) -> None:
    """A RegistryError unless the contract's per-tensor fields name inputs of the op (or upstream)."""
    known = (*spec.input_names(), UPSTREAM)
    unknown = sorted(set(contract.named()) - set(known))
    if unknown:
        raise RegistryError(f"{who} names unknown input(s) {', '.join(unknown)} of op {spec.name!r} in its contract; "
                            f"known: {', '.join(known)}")


def _where(obj: Any) -> str:
    try:
        target = inspect.unwrap(obj)
        file = inspect.getsourcefile(target) or "?"
        line = inspect.getsourcelines(target)[1]
        return f"{file}:{line}"
    except (TypeError, OSError):
        return repr(obj)


def _identity(spec: Any) -> Any:
    """What makes two registrations the same op: the class, or where a declaration was made."""
    return getattr(spec, "declared_at", None) or type(spec)


def _origin(spec: Any) -> str:
    return getattr(spec, "declared_at", None) or _where(type(spec))


def _decorator(op: str, name: str | None, contract: Contract | None, kind: str, origin: str | None, description: str, meta: dict | None):
    if not isinstance(op, str):
        raise RegistryError(f"the first argument is the op name (a string), got {op!r}")
    if contract is not None and not isinstance(contract, Contract):
        raise RegistryError(f"contract must be a harness.Contract, got {type(contract).__name__}")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise RegistryError(f"register_{kind} decorates a callable, got {fn!r}")
        plugin = REGISTRY._loading_plugin
        entry = KernelEntry(
            op=op,
            name=name or fn.__name__,
            fn=fn,
            contract=contract or Contract(),
            kind=kind,
            origin=origin or (Origin.PLUGIN if plugin else Origin.PROJECT),
            defined_at=_where(fn),
            plugin=plugin,
            description=description or (inspect.getdoc(fn) or "").split("\n")[0],
            meta=dict(meta or {}),
        )
        REGISTRY.add(entry)
        return fn

    return wrap


def register_kernel(op: str, *, name: str | None = None, contract: Contract | None = None, description: str = ""):
    """Register a kernel under test for ``op``. ``verify`` runs every registered kernel."""
    return _decorator(op, name, contract, EntryKind.KERNEL, None, description, None)


def register_mutant(
    op: str,
    *,
    name: str | None = None,
    contract: Contract | None = None,
    description: str = "",
    origin: str | None = None,
    meta: dict | None = None,
):
    """Register a deliberately broken kernel that the harness is expected to catch.

    ``verify`` never runs mutants; ``mutate`` does.
    """
    return _decorator(op, name, contract, EntryKind.MUTANT, origin, description, meta)


def register_op(spec: Any) -> Any:
    """Record an op: a call on a declaration, ``register_op(OpDecl(...))`` (harness.registry.declare),
    from which harness.ops.derive builds the spec (an op with its own floor, strategy or inputs
    gives them as the declaration's hooks: attention, fused_linear_cross_entropy), or a subclass
    of ``harness.ops.derive.DeclaredOp`` built on one, which it instantiates. Either way the op has the declared ops' one error model. Returns its argument."""
    from harness.registry.declare import OpDecl
    from harness.ops.derive import DeclaredOp

    if isinstance(spec, OpDecl):
        caller = inspect.currentframe().f_back
        REGISTRY.add_op(DeclaredOp(spec, declared_at=f"{caller.f_code.co_filename}:{caller.f_lineno}"))
        return spec
    if not (isinstance(spec, type) and issubclass(spec, DeclaredOp)):
        raise RegistryError(f"register_op takes an OpDecl, or a subclass of harness.ops.derive.DeclaredOp built on "
                            f"one, got {spec.__name__ if isinstance(spec, type) else type(spec).__name__}: declare the "
                            "op's inputs, reference and value kinds in an OpDecl (docs/declaring-ops.md)")
    REGISTRY.add_op(spec())
    return spec


_BUILTINS_LOADED = False


def load_builtin_ops() -> None:
    """Import every op spec under ``properties/ops/``: adding an op means adding a file there."""
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    discovery.import_all(discovery.OPS)


def load_project_kernels() -> None:
    """Import every module of the ``kernels`` package; each registers its kernels."""
    load_builtin_ops()
    discovery.import_all(discovery.KERNELS)
