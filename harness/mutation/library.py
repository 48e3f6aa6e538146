"""Library mutation: mutants of a third-party module's ``@triton.jit`` functions, run through
the plugin kernels that call into it (``mutate --mutate-module MODULE --plugin FILE``).

The mutations are the project's (harness.mutation.mutagen over harness.mutation.operators),
generated from each module's source as installed; nothing on disk changes. A mutant is named
``gen.<module>.<function>.<operator>.<k>`` and registered for the op of its *carrier*: the
plugin kernel that reaches the mutated function (through the names its code uses, followed from
module to module inside the library's top-level package, to a module that binds the function),
the nearest first, ties by (op, name); ``--carrier GLOB`` restricts the candidates. Each carrier gets a forced failure for the sanity
step, as the project's kernels do.

When a mutant runs (in a kernel process of its own: harness.mutation.campaign), its callable
builds the mutated function and swaps it in wherever the library looks it up
(harness.mutation.swap), then calls the carrier; the swap stays for the backward and is undone
when the kernel process binds another entry or ends. A launch Triton refuses marks the mutant
incompetent, as for the project's mutants (every jit function of the library is guarded while
the swap holds: a mutated helper fails to compile inside its caller).

The fingerprint of a library mutant is a digest of the mutated function's source: a mark of
equivalence (``--equivalent FILE``) whose fingerprint differs is stale (the library changed).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import importlib
import os
import sys
import types
from typing import Any, Callable

from harness.errors import UsageError
from harness.mutation import mutagen, swap
from harness.mutation.outcome import SANITY_PREFIX
from harness.registry.registry import Origin, REGISTRY, KernelEntry, register_mutant
from vocabulary import EntryKind

ORIGIN = Origin.LIBRARY


@dataclasses.dataclass(frozen=True)
class Target:
    """One mutated module, the plugin kernel that carries each of its functions' mutants, and
    the mutants' names."""

    module: str
    carriers: dict[str, KernelEntry]  # function -> carrier
    mutants: tuple[str, ...]


def import_module(name: str) -> types.ModuleType:
    """The module, or a UsageError in one line (exit 2)."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any import failure of the user's module is bad usage
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UsageError(f"--mutate-module {name!r} cannot be imported ({type(exc).__name__}: {first}); "
                         "give an importable module name such as liger_kernel.ops.rms_norm") from None


def register(modules: tuple[str, ...], carrier: str = "*") -> list[Target]:
    """Register the mutants of every ``@triton.jit`` function of each module, and a forced
    failure per carrier; idempotent (a kernel process and the parent register the same)."""
    targets = []
    for name in modules:
        import_module(name)
        mutations = mutagen.mutations(name)
        carriers = {f: choose_carrier(name, f, carrier) for f in dict.fromkeys(m.function for m in mutations)}
        for chosen in carriers.values():
            _register_forced_failure(chosen)
        targets.append(Target(name, carriers, tuple(_register(m, carriers[m.function]) for m in mutations)))
    return targets


def candidates(carrier: str) -> list[KernelEntry]:
    globs = [g.strip() for g in carrier.split(",") if g.strip()] or ["*"]
    return [e for e in REGISTRY.select(kind=EntryKind.KERNEL) if e.origin is Origin.PLUGIN
            and any(fnmatch.fnmatchcase(e.name, g) for g in globs)]


def choose_carrier(module: str, function: str, carrier: str = "*") -> KernelEntry:
    """The plugin kernel nearest to ``module.function`` (fewest modules in between on the way to
    a namespace that binds it), ties by (op, name); for a function no kernel reaches, the one
    nearest to the module."""
    kernels = candidates(carrier)
    target = getattr(sys.modules[module], function, None)
    for reaches in (lambda ns: any(v is target for v in ns.values()), lambda ns: ns is vars(sys.modules[module])):
        found = [(d, e.op, e.name, e) for e in kernels if (d := distance(e.fn, module, reaches)) is not None]
        if found:
            return min(found, key=lambda t: t[:3])[3]
    plugins = ", ".join(sorted(e.name for e in kernels)) or "none"
    raise UsageError(f"no --plugin kernel{'' if carrier == '*' else f' matching --carrier {carrier!r}'} calls into "
                     f"{module} (plugin kernels: {plugins}); pass a plugin whose kernel uses the library")


def distance(fn: Callable, module: str, reaches: Callable[[dict], bool]) -> int | None:
    """How many modules lie between ``fn`` and the first namespace ``reaches`` accepts, following
    the names each module uses inside ``module``'s top-level package; None if none is reached."""
    top = module.split(".")[0]
    frontier = {m for m in map(_module_of, _referenced(fn)) if m and m.split(".")[0] == top}
    seen: set[str] = set()
    depth = 0
    while frontier:
        if any(reaches(vars(sys.modules[m])) for m in frontier):
            return depth
        seen |= frontier
        following = set()
        for name in frontier:
            following.update(m for m in map(_module_of, vars(sys.modules[name]).values()) if m and m.split(".")[0] == top)
        frontier = following - seen
        depth += 1
    return None


def _referenced(fn: Any) -> list[Any]:
    """The objects a function's code names: its globals used (nested code included) and its closure."""
    target = getattr(fn, "__wrapped__", fn)
    code = getattr(target, "__code__", None)
    if code is None:  # a callable object: what its module holds
        module = sys.modules.get(getattr(type(target), "__module__", ""), None)
        return list(vars(module).values()) if module else []
    names, todo = set(), [code]
    while todo:
        c = todo.pop()
        names.update(c.co_names)
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    globals_ = getattr(target, "__globals__", {})
    cells = [cell.cell_contents for cell in (target.__closure__ or ()) if _filled(cell)]
    found = [globals_[n] for n in names if n in globals_] + cells
    return found + [x for c in cells if callable(c) and hasattr(c, "__code__") for x in _referenced(c)]


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _module_of(value: Any) -> str | None:
    if isinstance(value, types.ModuleType):
        return value.__name__
    name = getattr(value, "__module__", None)
    return name if isinstance(name, str) and name in sys.modules else None


def mutant_name(mutation: mutagen.Mutation) -> str:
    return f"gen.{mutation.module}.{mutation.function}.{mutation.operator}.{mutation.index}"


def fingerprint(function_source: str) -> str:
    return hashlib.sha1(function_source.encode()).hexdigest()[:12]


def _register_forced_failure(carrier: KernelEntry) -> None:
    name = SANITY_PREFIX + carrier.name
    if (carrier.op, name) in REGISTRY.entries:
        return

    def broken(*args, **kwargs):
        return carrier.fn(*args, **kwargs) + 1

    register_mutant(carrier.op, name=name, contract=carrier.contract, origin=Origin.SANITY,
                    description=f"forced failure: {carrier.name} with 1 added to its output")(broken)


def _register(mutation: mutagen.Mutation, carrier: KernelEntry) -> str:
    from harness.mutation.operators import BACKENDS

    module, name = mutation.module, mutant_name(mutation)
    if (carrier.op, name) not in REGISTRY.entries:
        source = mutation.function_source
        backends = BACKENDS.get(mutation.operator)
        register_mutant(
            carrier.op, name=name, contract=carrier.contract, origin=ORIGIN,
            description=f"{mutation.operator} in {module}.{mutation.function} at {mutation.location}, run through {carrier.name}",
            meta={"operator": mutation.operator, "location": mutation.location, "diff": mutation.diff,
                  "fingerprint": fingerprint(source), "kernel": carrier.name, "module": module,
                  "function": mutation.function, **({"backends": list(backends)} if backends is not None else {})},
        )(LibraryMutant(name, module, mutation.function, source, carrier.fn))
    return name


class LibraryMutant:
    """The carrier kernel, called with one library function swapped for its mutant.

    The swap is made on the first call and kept (the backward runs after the forward has
    returned) until ``release``. ``incompetent``: why the mutant cannot be a kernel (its source
    does not build, or Triton refuses a launch while it is in place)."""

    def __init__(self, name: str, module: str, function: str, source: str, carrier: Callable):
        self.name, self.module, self.function, self.source = name, module, function, source
        self.carrier = carrier
        self.incompetent: str | None = None
        self._swap: swap.Swap | None = None
        self._guarded: list[tuple[Any, bool, Any]] = []

    def __repr__(self) -> str:
        return f"<library mutant {self.name}>"

    def mark_incompetent(self, why: str) -> None:
        self.incompetent = self.incompetent or why

    def spec(self) -> dict:
        """What the tests' bootstrap needs to install this mutant (harness.mutation.swap)."""
        return {"module": self.module, "function": self.function, "source": self.source, "mutant": self.name}

    def activate(self) -> None:
        if self._swap is not None:
            return
        try:
            replacement = swap.build(self.module, self.function, self.source, self.name)
        except Exception as exc:  # noqa: BLE001 - the mutated source does not even define the function
            self.mark_incompetent(f"the mutated function does not build: {type(exc).__name__}: {exc}")
            raise
        self._swap = swap.Swap(self.module, self.function, replacement).install()
        self._guard_library(replacement)

    def _guard_library(self, replacement: Any) -> None:
        """Guard the launches of the mutant and of every jit function of the library (a
        mutated helper is compiled inside its caller, whose launch then fails)."""
        top = self.module.split(".")[0]
        jits = {id(replacement): replacement}
        for name, module in list(sys.modules.items()):
            if name.split(".")[0] == top:
                jits.update((id(v), v) for v in vars(module).values() if mutagen.is_jit(v))
        for jit in jits.values():
            own = "run" in vars(jit)
            self._guarded.append((jit, own, vars(jit).get("run")))
            mutagen.guard_launches(jit, self.mark_incompetent)

    def release(self) -> None:
        for jit, own, run in reversed(self._guarded):
            if own:
                jit.run = run
            else:
                vars(jit).pop("run", None)
        self._guarded = []
        if self._swap is not None:
            self._swap.restore()
            self._swap = None

    def __call__(self, *args, **kwargs):
        self.activate()
        return self.carrier(*args, **kwargs)


def mutants_of(entries: list[KernelEntry]) -> list[KernelEntry]:
    return [e for e in entries if e.origin is ORIGIN]


def driver_args(plugins, modules: tuple[str, ...], carrier: str = "*") -> tuple[str, ...]:
    """What the sanitizer's driver needs to find a library mutant (its plugins, modules and
    carrier); nothing for a project campaign (no ``modules``)."""
    if not modules:
        return ()
    words = [w for path in plugins for w in ("--plugin", os.path.abspath(path))]
    words += [w for m in modules for w in ("--mutate-module", m)]
    return tuple(words + (["--carrier", carrier] if carrier != "*" else []))
