"""One function of a live library replaced by its mutant wherever the library looks it up.

A library mutant (harness.mutation.library) is the source of one ``@triton.jit`` function of
an importable module, changed once. ``build`` executes that source in the module's own
namespace (so its helpers, constants and imports resolve as the original's do) under a file
name that exists only in ``linecache`` (Triton reads a jit function's source from there; no
file on disk is touched), without binding it. ``Swap.install`` then rebinds every name that
holds the original object, in the module and in every module already imported that bound it
by name (``from .utils import foo``), to the mutant; ``Swap.restore`` puts the originals back.

Code that copied the original into another container (a dict, a class attribute, a closure)
keeps the original: the mutant is not seen there.

This module imports the standard library only: the bootstrap that installs a mutant in the
processes of a library's own test command (harness.mutation.library_tests) loads it by path,
before anything of the harness or the library is imported. ``install_on_import`` is that
bootstrap's hook: the swap happens as soon as the module has been executed, before any other
module imports names from it, so nothing there can hold the original.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import linecache
import sys
from typing import Any

SPEC_ENV = "HARNESS_LIBRARY_MUTANT"  # path of the JSON spec of the mutant to install (the tests' processes)


def build(module_name: str, function: str, source: str, mutant: str) -> Any:
    """The object that ``source`` (a decorated function definition) defines, executed in
    ``module_name``'s namespace; the module itself is left unchanged."""
    module = importlib.import_module(module_name)
    digest = hashlib.sha1(source.encode()).hexdigest()[:10]
    filename = f"<library mutant {mutant} of {module_name} {digest}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    code = compile(source, filename, "exec")
    defined: dict[str, Any] = {}
    exec(code, module.__dict__, defined)
    if function not in defined:
        raise NameError(f"the mutated source of {module_name} does not define {function!r}")
    return defined[function]


class Swap:
    """The bindings of one module-level object replaced by another, and how to put them back."""

    def __init__(self, module_name: str, function: str, replacement: Any):
        self.module_name, self.function, self.replacement = module_name, function, replacement
        self.bindings: list[tuple[dict, str, Any]] = []  # (namespace, name, original)

    def install(self) -> "Swap":
        module = importlib.import_module(self.module_name)
        original = module.__dict__[self.function]
        for namespace in _namespaces():
            for name, value in list(namespace.items()):
                if value is original:
                    self.bindings.append((namespace, name, original))
                    namespace[name] = self.replacement
        return self

    def restore(self) -> None:
        for namespace, name, original in reversed(self.bindings):
            if namespace.get(name) is self.replacement:
                namespace[name] = original
        self.bindings = []

    def places(self) -> list[str]:
        """Where the mutant is bound now, as ``module.name`` (the module's own name first)."""
        names = {id(vars(m)): m.__name__ for m in list(sys.modules.values()) if isinstance(getattr(m, "__dict__", None), dict)}
        return [f"{names.get(id(ns), '?')}.{name}" for ns, name, _ in self.bindings]


def _namespaces() -> list[dict]:
    out, seen = [], set()
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if isinstance(namespace, dict) and id(namespace) not in seen:
            seen.add(id(namespace))
            out.append(namespace)
    return out


def read_spec(path: str) -> dict:
    """{module, function, source, mutant}: what the harness wrote for one mutant."""
    with open(path) as f:
        spec = json.load(f)
    missing = {"module", "function", "source", "mutant"} - set(spec)
    if missing:
        raise ValueError(f"library mutant spec {path} lacks {sorted(missing)}")
    return spec


def install_spec(spec: dict) -> Swap:
    replacement = build(spec["module"], spec["function"], spec["source"], spec["mutant"])
    return Swap(spec["module"], spec["function"], replacement).install()


class _SwapAfterExec:
    """A module loader that runs the real one, then swaps the mutant in."""

    def __init__(self, loader: Any, spec: dict):
        self._loader, self._spec = loader, spec

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, is_package... as the real loader
        return getattr(self._loader, name)

    def create_module(self, module_spec):
        return self._loader.create_module(module_spec)

    def exec_module(self, module) -> None:
        module.__loader__ = self._loader  # inspect and linecache read the source through the real loader
        self._loader.exec_module(module)
        sys.modules[module.__name__] = module
        install_spec(self._spec)


class _Finder:
    """Finds the target module with the other finders and hands back a loader that swaps."""

    def __init__(self, spec: dict):
        self.spec = spec

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.spec["module"]:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            found = finder.find_spec(fullname, path, target)
            if found is not None and found.loader is not None:
                found.loader = _SwapAfterExec(found.loader, self.spec)
                return found
        return None


def install_on_import(spec: dict) -> None:
    """Swap the mutant in as soon as its module is imported (now, if it already is)."""
    if spec["module"] in sys.modules:
        install_spec(spec)
        return
    sys.meta_path.insert(0, _Finder(spec))
