"""Mutant schemata: the generated mutants of one kernel module built as one module, the mutation
chosen by a runtime argument, so that CUDA compiles a kernel once per specialization key for all
of them instead of once per mutant (the mutant-schema technique of mutation tools for compiled
languages).

The schema of a module is its source with each changed statement (the nearest ``ast.stmt`` that
holds a member mutation's changed node: a whole loop for ``loop_bound``) replaced by

    if MUTANT == k1:
        <the statement as mutant k1 has it>
    elif MUTANT == k2:
        ...
    else:
        <the original statement>

``MUTANT`` is a new int parameter of every jit function that holds a branch or calls one that
does, listed in ``do_not_specialize`` (one key for every mutant id), passed at each jit-to-jit call
of the module; at the host, each launch of the schema's jit functions gets it from the running
mutant (``SchemaMutant``: the one the kernel process called last, until it is released). A runtime
``if``, never ``tl.where``: only the chosen branch runs, on the GPU (an ``scf.if``) and in the
interpreter (a Python ``if`` on a scalar), so an unmasked load of one mutant never runs in another
and no dtype promotion joins two branches' values before the join.

What stays a mutant of its own (``eligible``): catalog patches and host mutants (they are not
generated from a jit function), the operators whose branch cannot join one ``scf.if`` on CUDA
(``KEPT_APART``: the two sides yield a value of different types) and a changed node inside a shape
(a perturbed constexpr there changes a tile's shape). On CUDA a branch whose two sides still
yield different types, or that does not compile at all, raises a ``CompilationError`` on the
schema's first launch: the mutant whose branch holds the error's line leaves the schema (the
schema is rebuilt without it, ``Plan.leave``) and runs built alone, where an error is its own (it
is incompetent, as without schemata). Each kernel process does this on its own.

The clean kernels never run a schema: only a generated mutant's call does. ``HARNESS_SCHEMATA=0``
(``mutate --no-schemata``) builds every mutant alone, as before.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import hashlib
import importlib
import os
import traceback
import types
from typing import Any, Callable

from harness.mutation import mutagen
from harness.run import specializations

PARAM = "MUTANT"
ENV = "HARNESS_SCHEMATA"  # "0": every generated mutant built alone (mutate --no-schemata)
KEPT_APART = frozenset({"drop_upcast", "drop_int64_cast"})  # the branch's value has another dtype than the original's
SHAPE_CALLS = frozenset({"arange", "zeros", "full", "reshape", "view", "broadcast_to", "expand_dims", "static_range", "zeros_like", "full_like"})
JIT = "__schema_jit__"  # the name the schema's jit decorators call (``jit``)

_running: list[Any] = [None]  # the SchemaMutant whose call or backward the kernel process runs now


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


def jit(fn=None, **options):
    """``triton.jit`` with ``MUTANT`` kept out of the specialization key."""
    import triton

    for option in ("do_not_specialize", "do_not_specialize_on_alignment"):
        options[option] = (*(options.get(option) or ()), PARAM)
    return triton.jit(fn, **options) if fn is not None else triton.jit(**options)


# --- which mutants, and the schema's source ----------------------------------------------------------


def _parents(tree: ast.AST) -> dict[int, tuple[ast.AST, str, int | None]]:
    out = {}
    for node in ast.walk(tree):
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        out[id(item)] = (node, field, i)
            elif isinstance(value, ast.AST):
                out[id(value)] = (node, field, None)
    return out


def _statement(node: ast.AST, parents: dict) -> ast.stmt:
    while not isinstance(node, ast.stmt):
        node = parents[id(node)][0]
    return node


def _in_shape(node: ast.AST, parents: dict) -> bool:
    """The node is (inside) an argument of a call that takes a shape or a constexpr range."""
    from harness.mutation.operators import call_name

    while id(node) in parents and not isinstance(node, ast.stmt):
        parent = parents[id(node)][0]
        if isinstance(parent, ast.Call) and node is not parent.func and call_name(parent) in SHAPE_CALLS:
            return True
        node = parent
    return False


def eligible(mutation: mutagen.Mutation, jit_functions: set[str], parents: dict) -> bool:
    """A generated mutant of a jit function whose changed statement can be a runtime branch."""
    node = mutation._site[3]
    return (mutation.function in jit_functions and mutation.operator not in KEPT_APART
            and not _in_shape(node, parents))


@dataclasses.dataclass
class Source:
    """A schema's text and where each branch is: id -> (function, first line, last line), lines of
    the text (the ``if``/``elif`` line of the branch to its last line)."""

    text: str
    branches: dict[int, tuple[str, int, int]]
    takes_mutant: frozenset[str]  # the jit functions given the MUTANT parameter


def schema_source(members: dict[int, mutagen.Mutation]) -> Source:
    """The schema of ``members`` (id -> mutation, all of one module's ``mutagen.mutations``)."""
    tree = next(iter(members.values()))._tree
    parents = _parents(tree)
    pristine = copy.deepcopy(tree)
    twin = {id(a): b for a, b in zip(ast.walk(tree), ast.walk(pristine))}
    groups: dict[int, list[tuple[int, ast.stmt]]] = {}
    statements: dict[int, ast.stmt] = {}
    for k, m in sorted(members.items()):
        parent, field, idx, node = m._site
        stmt = _statement(node, parents)
        with mutagen._swapped(parent, field, idx, node, m._replacement):
            branch = copy.deepcopy(m._replacement if stmt is node else stmt)
        groups.setdefault(id(stmt), []).append((k, branch))
        statements[id(stmt)] = stmt
    for key, branches in groups.items():
        stmt = statements[key]
        holder, field, idx = parents[id(stmt)]
        original = twin[id(stmt)]
        chain: list[ast.stmt] = [original]
        for k, branch in reversed(branches):
            test = ast.Compare(ast.Name(PARAM, ast.Load()), [ast.Eq()], [ast.Constant(k)])
            chain = [ast.If(test, [branch], chain)]
        getattr(twin[id(holder)], field)[idx] = chain[0]
    jits = {fn.name: fn for fn in pristine.body if mutagen._is_jit_def(fn)}
    calls = _calls(pristine)
    branched = {m.function for m in members.values()}
    takes = set(branched)
    while True:
        more = {name for name, callees in calls.items() if callees & takes} - takes
        if not more:
            break
        takes |= more
    for name in takes:
        fn = jits[name]
        fn.args.args.append(ast.arg(PARAM, _annotation()))
        fn.decorator_list = [_schema_decorator(d) for d in fn.decorator_list]
        for c in ast.walk(fn):
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in takes:
                c.keywords.append(ast.keyword(PARAM, ast.Name(PARAM, ast.Load())))
    text = ast.unparse(ast.fix_missing_locations(pristine)) + "\n"
    return Source(text, _branches(text), frozenset(takes))


def _calls(tree: ast.Module) -> dict[str, set[str]]:
    """Each jit function of the module -> the module's jit functions it calls."""
    jits = {fn.name: fn for fn in tree.body if mutagen._is_jit_def(fn)}
    return {name: {c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                   and c.func.id in jits} for name, fn in jits.items()}


def _interpreting() -> bool:
    from harness.run import backend

    return backend.current().is_interpreter


def _annotation() -> ast.expr | None:
    """``MUTANT``'s annotation: none on a GPU (a runtime int, one compile for every id); in the
    interpreter, which compiles nothing, a constexpr: ``MUTANT == k`` is then a Python comparison,
    not a tensor operation on every program's every branch (the same branch is taken)."""
    if _interpreting():
        return ast.Attribute(ast.Name("tl", ast.Load()), "constexpr", ast.Load())
    return None


def _callers(function: str, calls: dict[str, set[str]]) -> set[str]:
    """``function`` and the module's jit functions that call it, directly or not."""
    out = {function}
    while True:
        more = {name for name, callees in calls.items() if callees & out} - out
        if not more:
            return out
        out |= more


def _schema_decorator(d: ast.expr) -> ast.expr:
    if isinstance(d, ast.Call) and "jit" in ast.unparse(d.func):
        return ast.Call(ast.Name(JIT, ast.Load()), d.args, d.keywords)
    if "jit" in ast.unparse(d):
        return ast.Name(JIT, ast.Load())
    return d


def _branches(text: str) -> dict[int, tuple[str, int, int]]:
    out = {}
    for fn in ast.parse(text).body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            if (isinstance(node, ast.If) and isinstance(node.test, ast.Compare) and isinstance(node.test.left, ast.Name)
                    and node.test.left.id == PARAM and isinstance(node.test.comparators[0], ast.Constant)):
                out[node.test.comparators[0].value] = (fn.name, node.lineno, node.body[-1].end_lineno)
    return out


# --- the schema in the kernel process ----------------------------------------------------------------


class Plan:
    """One module's schema in this process: its members (ids of the mutations that are still in
    it) and, once a member has run, the built module."""

    def __init__(self, module: str, members: dict[int, mutagen.Mutation]):
        self.module, self.mutations = module, members
        self.members: set[int] = set(members)
        self.built: Built | None = None
        self._calls = _calls(next(iter(members.values()))._tree) if members else {}
        self._alone: dict[int, dict[str, str]] = {}  # per mutant: its reached functions' digests alone

    def reach(self, ident: int) -> set[str]:
        """The jit functions whose program mutant ``ident`` changes: its own and their callers."""
        return _callers(self.mutations[ident].function, self._calls)

    def alone(self, ident: int, name: str) -> str:
        """The digest (harness.run.specializations.source) of jit function ``name`` of mutant
        ``ident`` built alone, without executing it: its mutated module compiled, the functions
        its change reaches made over the clean module's globals (the mutations change one jit
        function each), the others the clean module's."""
        found = self._alone.get(ident)
        if found is None:
            clean = importlib.import_module(self.module)
            mutation = self.mutations[ident]
            # the whole module, compiled as mutagen compiles it (a function compiled alone can differ)
            code = compile(mutation.source, f"<mutant {ident} of {self.module}>", "exec")
            changed = next(c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == mutation.function)
            namespace = dict(vars(clean))
            made = {}
            for function in self.reach(ident):  # its callers' own code is the clean one
                own = changed if function == mutation.function else getattr(clean, function).fn.__code__
                made[function] = types.FunctionType(own, namespace, function)
                namespace[function] = _Program(made[function])
            found = self._alone[ident] = {f: specializations.source(fn) for f, fn in made.items()}
        if name in found:
            return found[name]
        return specializations.source(getattr(importlib.import_module(self.module), name).fn)

    def current(self) -> Built | None:
        """The built schema of the current members (built on first use); None when it has none."""
        if self.built is None and self.members:
            try:
                self.built = Built(self, schema_source({k: self.mutations[k] for k in sorted(self.members)}))
            except Exception:  # a schema that does not build: every member runs alone, as without schemata
                self.members = set()
        return self.built

    def leave(self, ids: set[int], *, rebuild: bool = True) -> None:
        """These members run built alone from now on; ``rebuild``: the schema is rebuilt without
        them (on the next launch), else the built one stays (its branch for them is never taken)."""
        self.members -= ids
        if rebuild:
            self.built = None


class Built:
    """A built schema module: its jit functions dispatch each launch to the running mutant."""

    def __init__(self, plan: Plan, source: Source):
        self.plan, self.source = plan, source
        label = f"schema of {len(plan.members)}"
        self.mod, self.entries = mutagen.exec_module(plan.module, source.text, label, {JIT: jit})
        self.filename = self.mod.__file__
        self.digest = hashlib.sha1(source.text.encode()).hexdigest()[:10]
        for name, value in list(self.mod.__dict__.items()):
            if mutagen.is_jit(value) and name in source.takes_mutant:
                _dispatch(value, plan, name)

    def entry(self, kernel: str) -> Callable[..., Any]:
        return mutagen.registered(self.entries, kernel, self.plan.module, "schema")

    def branch_of(self, exc: BaseException) -> int | None:
        """The mutant whose branch holds the line a compile error names, if one does."""
        line = _error_line(exc, self)
        if line is None:
            return None
        function, at = line
        return next((k for k, (fn, lo, hi) in self.source.branches.items()
                     if (function is None or fn == function) and lo <= at <= hi), None)


def _error_line(exc: BaseException, built: Built) -> tuple[str | None, int] | None:
    """(function, line of the schema text) of the deepest place an error chain names: a Triton
    ``CompilationError``'s node (a line of its function's source), else the deepest traceback
    frame in the schema's file (the interpreter)."""
    chain, seen = [], exc
    while seen is not None and len(chain) < 16:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    for e in reversed(chain):
        node, src = getattr(e, "node", None), getattr(e, "src", None)
        if isinstance(getattr(node, "lineno", None), int) and isinstance(src, str):
            head = src.lstrip().split("(", 1)[0].split()
            function = head[1] if len(head) > 1 and head[0] == "def" else None
            start = next((lo for name, lo in _def_lines(built) if name == function), None)
            if start is not None:
                return function, start + node.lineno - 1
    for e in reversed(chain):
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == built.filename]
        if frames:
            return None, frames[-1].lineno
    return None


def _def_lines(built: Built) -> list[tuple[str, int]]:
    found = getattr(built, "_defs", None)
    if found is None:
        found = built._defs = [(fn.name, fn.lineno) for fn in ast.parse(built.source.text).body
                               if isinstance(fn, ast.FunctionDef)]
    return found


def _dispatch(jitfn: Any, plan: Plan, name: str) -> None:
    """Wrap one schema jit function's ``run``: the launch goes to the current schema with the
    running mutant's id, or to the running mutant's own module once it has left the schema."""
    jitfn.alone_source = lambda: _alone_source(plan, name)
    jitfn.schema_params = (PARAM,)

    def run(*args, **kwargs):
        mutant = _running[0]
        if mutant is None or mutant.plan is not plan:
            raise RuntimeError(f"a schema kernel of {plan.module} was launched while none of its mutants runs")
        for _ in range(len(plan.mutations) + 1):
            built = plan.current()
            if mutant.id not in plan.members or built is None:
                mutant.build()
                return mutant.namespace[name].run(*args, **kwargs)
            target = built.mod.__dict__[name]
            if name not in built.source.takes_mutant:  # a rebuilt schema left this function as it was
                return target.run(*args, **kwargs)
            launch = {**kwargs, PARAM: mutant.id}
            try:
                return target._schema_run(*args, **launch)
            except Exception as exc:
                if mutagen.incompetence(exc) is None:
                    raise
                specializations.forget(target, args, launch)  # redone below: by the rebuilt schema or alone
                j = built.branch_of(exc)
                # the interpreter runs the running mutant's branch only: its own error leaves the
                # schema as it is for the others; a GPU compiles every branch: rebuilt without it
                own = j is None or j == mutant.id
                plan.leave({mutant.id if own else j}, rebuild=not (own and _interpreting()))
        raise RuntimeError(f"the schema of {plan.module} did not settle")  # pragma: no cover - each pass removes a member

    # the class's run, looked up at each launch (harness.run.launches wraps it, maybe after this)
    jitfn._schema_run = lambda *args, **kwargs: type(jitfn).run(jitfn, *args, **kwargs)
    jitfn.run = run


class _Program:
    """A jit function as harness.run.specializations.source reads one: its Python function."""

    def __init__(self, fn):
        self.fn = fn

    def run(self, *args, **kwargs):  # pragma: no cover - never launched: only read for its code
        raise RuntimeError("a stand-in for a digest, never launched")


def _alone_source(plan: Plan, name: str) -> str:
    """What ``harness.run.specializations`` names this launch's program with if the running mutant
    were built alone (``Plan.alone``)."""
    mutant = _running[0]
    if mutant is None:
        return specializations.source(getattr(importlib.import_module(plan.module), name).fn)
    return plan.alone(mutant.id, name)


class SchemaMutant(mutagen.SourceMutant):
    """A generated mutant that runs as its branch of its module's schema (``build``, inherited,
    builds it alone: once it has left the schema)."""

    def __init__(self, plan: Plan, ident: int, module: str, kernel: str, name: str, source: Callable[[], str]):
        super().__init__(module, kernel, name, source)
        self.plan, self.id = plan, ident

    def __call__(self, *args, **kwargs):
        _running[0] = self
        built = self.plan.current()
        if built is None or self.id not in self.plan.members:
            return super().__call__(*args, **kwargs)
        try:
            fn = built.entry(self.kernel)
        except Exception:  # the schema registers no such kernel: this mutant runs alone
            self.plan.leave({self.id})
            return super().__call__(*args, **kwargs)
        return fn(*args, **kwargs)

    def release(self) -> None:
        """The kernel process binds another entry: its launches are not this mutant's."""
        if _running[0] is self:
            _running[0] = None


def plans(module_name: str, mutations: list[mutagen.Mutation]) -> dict[int, Plan]:
    """mutation position (0-based, in ``mutations``) -> the module's Plan, for each mutation
    that joins the schema (none when schemata are off)."""
    if not enabled() or not mutations:
        return {}
    tree = mutations[0]._tree
    jit_functions = {fn.name for fn in tree.body if mutagen._is_jit_def(fn)}
    parents = _parents(tree)
    members = {i + 1: m for i, m in enumerate(mutations) if eligible(m, jit_functions, parents)}
    if not members:
        return {}
    plan = Plan(module_name, members)
    return {k - 1: plan for k in members}
