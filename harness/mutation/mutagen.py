"""Source mutants of the project's kernel modules, re-jitted in memory.

A mutant is one kernel module's source with one change, executed under a file name that
exists only in ``linecache`` (Triton reads a jit function's source from there); the files on
disk are never touched. The whole module is re-executed, so a mutant runs through the
module's real wrapper and autograd code; the registry *captures* the entries the copy
registers (``REGISTRY.capturing()``) and the campaign registers the captured callable as a
mutant. Two sources of changes share this machinery:

- generated: ``harness.mutation.operators.OPERATORS`` applied to every node of every
  ``@triton.jit`` function of every module of the ``kernels`` package, and ``HOST_OPERATORS``
  to every node of the modules' other top-level functions (the launches), in a fixed order, so
  a worker process regenerates a mutant from its name alone;
- catalog: a hand-written text patch (``old`` -> ``new``, matching exactly once).

Every launch of a mutant module's jit functions is guarded: an exception Triton raises
while compiling (``CompilationError``; in the interpreter, a front-end error wrapped in
``InterpreterError``) marks the mutant *incompetent* (``SourceMutant.incompetent``) before the
exception reaches the runner. The kernel process sends that reason with the call's reply, and
the judge puts it in the job's ``done`` event (harness.execution.worker): it travels in the
worker's authenticated event stream like everything else the worker learns.

Length (over 400 lines): generated and catalog mutants share the module re-execution, the
``linecache`` sources and the launch guard; split, each half would import the other's internals.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import functools
import hashlib
import importlib
import inspect
import linecache
import os
import sys
import traceback
import types
from pathlib import Path
from typing import Any, Callable, Iterator

from harness.settings import PROJECT_ROOT
from harness.errors import HarnessError, RegistryError
from harness.registry import discovery
from harness.registry.registry import Origin, REGISTRY, KernelEntry, load_project_kernels, register_mutant
from vocabulary import EntryKind

ROOT = PROJECT_ROOT


# --- building a mutant module ----------------------------------------------------------------


class SourceMutant:
    """A callable that builds its mutated module on first use and calls the captured kernel.

    ``incompetent``: why the mutant cannot be a kernel at all (its module does not build, or
    Triton refuses to compile it), once a build or a launch has shown it; None until then."""

    def __init__(self, module: str, kernel: str, name: str, source: Callable[[], str]):
        self.module, self.kernel, self.name = module, kernel, name
        self._source = source
        self._fn: Callable[..., Any] | None = None
        self.namespace: dict[str, Any] = {}  # the built module's globals (its jit functions by name)
        self.incompetent: str | None = None

    def mark_incompetent(self, why: str) -> None:
        self.incompetent = self.incompetent or why

    def __repr__(self) -> str:
        return f"<mutant {self.name} of {self.module}.{self.kernel}>"

    def build(self) -> Callable[..., Any]:
        if self._fn is None:
            try:
                mod, self._fn = built(self.module, self._source(), self.kernel, self.name, self.mark_incompetent)
                self.namespace = mod.__dict__
            except (SyntaxError, RegistryError) as exc:  # unparseable, or registers nothing to run
                self.mark_incompetent(f"the mutated module does not build: {type(exc).__name__}: {exc}")
                raise
        return self._fn

    def __call__(self, *args, **kwargs):
        return self.build()(*args, **kwargs)


def build_module(module_name: str, source: str, kernel: str, mutant: str,
                 on_incompetent: Callable[[str], None] | None = None) -> Callable[..., Any]:
    """Execute ``source`` as a copy of ``module_name``; return the callable it registers as
    ``kernel``. A launch of its jit functions that Triton refuses calls ``on_incompetent``."""
    return built(module_name, source, kernel, mutant, on_incompetent)[1]


def built(module_name: str, source: str, kernel: str, mutant: str,
          on_incompetent: Callable[[str], None] | None = None) -> tuple[types.ModuleType, Callable[..., Any]]:
    """``build_module``'s module and callable."""
    mod, captured = exec_module(module_name, source, mutant)
    for value in list(mod.__dict__.values()):
        if on_incompetent is not None and is_jit(value):
            guard_launches(value, on_incompetent)
    return mod, registered(captured, kernel, module_name, mutant)


def exec_module(module_name: str, source: str, label: str,
                namespace: dict[str, Any] | None = None) -> tuple[types.ModuleType, list[KernelEntry]]:
    """Execute ``source`` as a copy of ``module_name`` (``namespace``: globals set before it runs)
    under a file name that exists only in ``linecache``; the module and the entries it registers."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:10]
    filename = f"<mutant {label} of {module_name} {digest}>"
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    original = importlib.import_module(module_name)
    copy_name = f"{module_name}__mutant_{digest}"
    mod = types.ModuleType(copy_name, original.__doc__)
    mod.__file__ = filename
    mod.__package__ = original.__package__
    mod.__dict__.update(namespace or {})
    sys.modules[copy_name] = mod
    code = compile(source, filename, "exec")
    with REGISTRY.capturing() as captured:
        exec(code, mod.__dict__)
    return mod, list(captured)


def registered(captured: list[KernelEntry], kernel: str, module_name: str, mutant: str) -> Callable[..., Any]:
    """The callable a mutated copy of ``module_name`` registered as ``kernel``."""
    found = [e for e in captured if e.name == kernel]
    if not found:
        names = ", ".join(e.name for e in captured) or "none"
        raise RegistryError(f"mutant {mutant}: the mutated copy of {module_name} registers no kernel named {kernel!r} (it registers: {names})")
    return found[0].fn


def is_jit(value: Any) -> bool:
    try:
        from triton.runtime.jit import KernelInterface
    except ImportError:  # no triton: nothing to guard
        return False
    return isinstance(value, KernelInterface) and callable(getattr(value, "run", None))


def guard_launches(jitfn: Any, on_incompetent: Callable[[str], None]) -> None:
    """Wrap ``jitfn.run``: an exception that means "does not compile" is reported before it
    propagates (the kernel's wrapper may catch it; the mutant is incompetent all the same)."""
    original = jitfn.run

    def run(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except Exception as exc:
            why = incompetence(exc)
            if why:
                on_incompetent(why)
            raise

    jitfn.run = run


def incompetence(exc: BaseException) -> str | None:
    """Why this launch exception means the mutant does not compile (None: a real failure).

    CompilationError on a GPU; in the interpreter, an InterpreterError whose cause was raised
    inside Triton's own front end (not by a harness guard such as the out-of-bounds check).
    """
    chain, seen = [], exc
    while seen is not None and len(chain) < 8:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    if any(isinstance(e, HarnessError) for e in chain):
        return None
    names = {type(e).__name__ for e in chain}
    if "CompilationError" in names or any(type(e).__name__.endswith("CompilationError") for e in chain):
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else ''}"
    if type(exc).__name__ == "InterpreterError" and exc.__cause__ is not None:
        frames = traceback.extract_tb(exc.__cause__.__traceback__)
        if frames and f"{os.sep}triton{os.sep}" in frames[-1].filename:
            return f"{type(exc.__cause__).__name__}: {str(exc.__cause__)[:300]}"
    return None


# --- generated mutants -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One generated change to one jit function of one module."""

    module: str
    function: str
    operator: str
    index: int  # 1-based, per (function, operator), in visiting order
    location: str  # path:line of the changed node in the file on disk
    diff: str  # unified diff of the function (unparsed before/after)
    _tree: ast.Module = dataclasses.field(repr=False, compare=False)
    _site: tuple = dataclasses.field(repr=False, compare=False)  # (parent, field, index, original node)
    _replacement: ast.AST = dataclasses.field(repr=False, compare=False)

    @property
    def source(self) -> str:
        """The whole mutated module, unparsed (computed on demand: only a worker needs it)."""
        parent, field, idx, node = self._site
        with _swapped(parent, field, idx, node, self._replacement):
            return ast.unparse(self._tree)

    @property
    def fingerprint(self) -> str:
        return hashlib.sha1(self.diff.encode()).hexdigest()[:12]

    @property
    def function_source(self) -> str:
        """The mutated function alone, decorators included, unparsed (what a library mutant
        executes in the library module's namespace: harness.mutation.library)."""
        parent, field, idx, node = self._site
        fn = next(n for n in self._tree.body if isinstance(n, ast.FunctionDef) and n.name == self.function)
        with _swapped(parent, field, idx, node, self._replacement):
            return ast.unparse(fn) + "\n"


def _visit(fn: ast.FunctionDef) -> list[tuple[ast.AST, ast.AST, str, int | None]]:
    """Every node of the function's body, pre-order: (node, parent, field, index in field)."""
    out = []

    def rec(node: ast.AST) -> None:
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        out.append((item, node, field, i))
                        rec(item)
            elif isinstance(value, ast.AST):
                out.append((value, node, field, None))
                rec(value)

    for i, stmt in enumerate(fn.body):
        out.append((stmt, fn, "body", i))
        rec(stmt)
    return out


def _scope(fn: ast.FunctionDef, visited, kernels: dict[str, tuple[str, ...]] | None = None) -> Any:
    from harness.mutation.operators import Scope

    params = tuple(a.arg for a in fn.args.args)
    constexprs = frozenset(
        a.arg for a in fn.args.args if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)
    )
    parents = {id(node): parent for node, parent, _, _ in visited}
    return Scope(params=params, constexprs=constexprs, parents=parents, kernels=dict(kernels or {}))


def _is_jit_def(fn: ast.AST) -> bool:
    return isinstance(fn, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in fn.decorator_list)


def mutations(module_name: str) -> list[Mutation]:
    """Every generated mutation of the module's @triton.jit functions (``OPERATORS``) and of its
    other top-level functions, the host code that launches them (``HOST_OPERATORS``), in a fixed
    order, without duplicates (two operators giving the same function text count once)."""
    from harness.mutation import operators as mutation_operators
    from harness.mutation.operators import HOST_OPERATORS, OPERATORS

    module = importlib.import_module(module_name)
    source = inspect.getsource(module)
    path = _display_path(inspect.getsourcefile(module) or module_name)
    tree = ast.parse(source)
    cache = _Picks(module_name, source, path, inspect.getsource(mutation_operators))
    kernels = {fn.name: tuple(a.arg for a in fn.args.args) for fn in tree.body if _is_jit_def(fn)}
    out: list[Mutation] = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        table = OPERATORS if fn.name in kernels else HOST_OPERATORS
        visited = _visit(fn)
        scope = _scope(fn, visited, kernels)
        before = ast.unparse(fn) if cache.known is None else None
        seen = {before}
        counters: dict[str, int] = {}
        for k, (node, parent, field, idx) in enumerate(visited):
            for op_name, operator in table.items():
                if cache.known is not None and (fn.name, k, op_name) not in cache.sites:
                    continue  # the picks of an identical source: no replacement of this operator here was kept
                for r, replacement in enumerate(operator(node, scope)):
                    site = (fn.name, k, op_name, r)
                    if cache.known is not None:  # the picks of an identical source: no unparse
                        if site not in cache.known:
                            continue
                        index, location, diff = cache.known[site]
                    else:
                        with _swapped(parent, field, idx, node, replacement):
                            after = ast.unparse(fn)
                        if after in seen:
                            continue
                        seen.add(after)
                        counters[op_name] = counters.get(op_name, 0) + 1
                        index, location = counters[op_name], f"{path}:{getattr(node, 'lineno', fn.lineno)}"
                        diff = _diff(before, after, fn.name)
                        cache.pick(site, index, location, diff)
                    out.append(Mutation(module=module_name, function=fn.name, operator=op_name, index=index,
                                        location=location, diff=diff, _tree=tree, _site=(parent, field, idx, node),
                                        _replacement=replacement))
    cache.save()
    return out


class _Picks:
    """Which (function, node, operator, replacement) sites ``mutations`` kept for one module
    source, with their index, location and diff: unparsing every candidate function to drop
    duplicates is most of an unchanged campaign's set-up (about 3 s), and the answer depends only
    on the module's source, the operators and this file. Kept under ``build/mutagen/`` (``make
    clean`` removes it); an unreadable or missing file means computing again."""

    FOLDER = PROJECT_ROOT / "build" / "mutagen"

    def __init__(self, module_name: str, source: str, path: str, operators: str) -> None:
        own = Path(__file__).read_text()  # the operators import nothing but the standard library
        key = hashlib.sha256("\0".join((source, path, operators, own, sys.version)).encode()).hexdigest()[:24]
        self.path = self.FOLDER / f"{module_name}-{key}.json"
        self.known: dict[tuple, tuple] | None = None
        self.picked: list | None = None
        self.sites: set[tuple] = set()
        try:
            import json

            self.known = {tuple(site): tuple(rest) for site, rest in json.loads(self.path.read_text())}
            self.sites = {site[:3] for site in self.known}  # (function, node, operator) that kept a pick
        except (OSError, ValueError, TypeError):
            self.picked = []

    def pick(self, site: tuple, index: int, location: str, diff: str) -> None:
        self.picked.append([list(site), [index, location, diff]])

    def save(self) -> None:
        if self.picked is None:
            return
        import json

        from reports import manifest, writer

        try:  # atomic and listed in the folder's manifest, like every file the harness writes
            writer.write_text(self.FOLDER, self.path.name, json.dumps(self.picked))
        except (OSError, manifest.ForeignFileError):
            pass  # a read-only checkout, or a file of that name the harness did not write: compute every time


@contextlib.contextmanager
def _swapped(parent: ast.AST, field: str, idx: int | None, node: ast.AST, replacement: ast.AST):
    """Put ``replacement`` where ``node`` is for the duration of the block (no tree copies)."""
    def put(value):
        if idx is None:
            setattr(parent, field, value)
        else:
            getattr(parent, field)[idx] = value

    put(replacement)
    try:
        yield
    finally:
        put(node)


def _diff(before: str, after: str, label: str) -> str:
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), f"{label} (original)", f"{label} (mutant)", n=1, lineterm="")
    return "\n".join(list(lines)[2:])


def _display_path(file: str) -> str:
    try:
        return str(Path(file).resolve().relative_to(ROOT))
    except ValueError:
        return file


def project_modules() -> list[str]:
    """Every module of the ``kernels`` package (a new op's kernels get mutants with no edit here)."""
    load_project_kernels()
    return discovery.modules(discovery.KERNELS)


def project_entries(module_name: str) -> list[KernelEntry]:
    return [e for e in REGISTRY.select(kind=EntryKind.KERNEL) if e.origin is Origin.PROJECT and getattr(e.fn, "__module__", None) == module_name]


def generated_name(entry: KernelEntry, mutation: Mutation, several: bool) -> str:
    fn = mutation.function.lstrip("_")
    prefix = f"gen.{entry.name}." if several else "gen."
    return f"{prefix}{fn}.{mutation.operator}.{mutation.index}"


# --- hand-written (catalog) mutants ------------------------------------------------------------


def patch_source(module_name: str, function: str | None, patches: list[tuple[str, str]]) -> tuple[str, str, str]:
    """Apply text patches (old -> new, in order) to a module's source; returns (mutated source,
    location of the first patch, diff).

    Each ``old`` must occur exactly once (inside ``function`` when one is named), so a catalog
    entry breaks loudly instead of silently patching the wrong line when the kernel changes.
    """
    module = importlib.import_module(module_name)
    original = source = inspect.getsource(module)
    path = _display_path(inspect.getsourcefile(module) or module_name)
    first_line = None
    start, end = _span(source, function, path)
    for old, new in patches:
        count = source.count(old, start, end)
        if count != 1:
            where = f"function {function} of {path}" if function else path
            raise RegistryError(
                f"catalog patch text {old!r} occurs {count} times in {where} (it must occur exactly once); "
                "update the catalog entry to match the kernel's current source"
            )
        at = source.index(old, start, end)
        first_line = first_line or source.count("\n", 0, at) + 1
        source = source[:at] + new + source[at + len(old):]
        end += len(new) - len(old)
    diff = "\n".join(
        list(difflib.unified_diff(original.splitlines(), source.splitlines(), "original", "mutant", n=1, lineterm=""))[2:]
    )
    return source, f"{path}:{first_line}", diff


def _span(source: str, function: str | None, path: str) -> tuple[int, int]:
    if function is None:
        return 0, len(source)
    spans = _def_spans(source)
    if function not in spans:
        raise RegistryError(f"catalog patch names function {function!r}, which {path} does not define; fix the catalog entry")
    return spans[function]


@functools.lru_cache(maxsize=32)
def _def_spans(source: str) -> dict[str, tuple[int, int]]:
    """name -> (start, end) character offsets of the first def or class of each name (one parse
    per module source, not one per catalog patch)."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    spans: dict[str, tuple[int, int]] = {}
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name not in spans:
            spans[n.name] = (offsets[n.lineno - 1], offsets[n.end_lineno])
    return spans


def register_catalog(op: str, *, kernel: str, module: str, entries: Iterator[dict] | list[dict]) -> None:
    """Register hand-written patches of one project kernel as catalog mutants (public API).

    Each item: name, bug_class, why, function (or None for the whole module), and either
    old/new or patches=[(old, new), ...] applied in order; optionally backends=[...], the only
    backends where the bug can be observed (a race: ["cuda"]; see campaign.observable_on).
    """
    base = REGISTRY.get(op, kernel)
    for item in entries:
        patches = item.get("patches") or [(item["old"], item["new"])]
        source, location, diff = patch_source(module, item.get("function"), patches)
        name = item["name"]
        fn = SourceMutant(module, kernel, name, lambda s=source: s)
        register_mutant(
            op,
            name=name,
            contract=base.contract,
            origin=Origin.CATALOG,
            description=item["why"],
            meta={
                "operator": f"catalog:{item['bug_class']}",
                "location": location,
                "diff": diff,
                "fingerprint": hashlib.sha1(diff.encode()).hexdigest()[:12],
                "kernel": kernel,
                **({"backends": list(item["backends"])} if item.get("backends") else {}),
            },
        )(fn)
