"""The key of a verdict: a digest of everything that can change it.

A kernel's verify verdict depends on the source of the module that defines it and of every
module that module imports from outside the installed packages (its jit helpers, a plugin's
local imports), the installed packages it imports (by version), the op's spec and everything
that imports (oracle, strategies, checks), the harness's own source, the torch and triton
versions, the backend and device, and the run's settings. The closure is followed through the
``import`` statements of the source files, so it is known before anything runs.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import sys
import sysconfig
from functools import lru_cache
from pathlib import Path

from harness.settings import PROJECT_ROOT
from vocabulary import Backend

_STDLIB = Path(sysconfig.get_paths()["stdlib"]).resolve()


def digest(parts: dict) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _file_of(module: str) -> Path | None:
    loaded = sys.modules.get(module)
    file = getattr(loaded, "__file__", None)
    if file is None:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError, AttributeError):
            return None
        file = spec.origin if spec is not None else None
    if not file or not file.endswith(".py"):
        return None
    return Path(file).resolve()


def _installed(path: Path) -> bool:
    """Installed code (a package, the standard library) is keyed by version, not content."""
    return "site-packages" in path.parts or "dist-packages" in path.parts or path.is_relative_to(_STDLIB)


@lru_cache(maxsize=None)  # one parse per file and process: every closure walks the same shared modules
def _imported_names(path: Path, package: str, text: bytes | None = None) -> frozenset[str]:
    names = set()
    source = path.read_bytes() if text is None else text
    for node in _statements(ast.parse(source, str(path)).body):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return frozenset(n for n in names if n)


def _statements(body: list):
    """Every statement of ``body`` and of the blocks nested in it (functions, classes, branches,
    loops, with, try, match): an import is a statement, so the expressions (most of a file's
    nodes) need no visit."""
    todo = list(body)
    while todo:
        node = todo.pop()
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                todo.extend(block)


@lru_cache(maxsize=None)
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


@lru_cache(maxsize=None)
def _distribution(module: str) -> str:
    top = module.split(".")[0]
    version = getattr(sys.modules.get(top), "__version__", None)
    if isinstance(version, str):
        return f"{top}=={version}"
    names = _distributions().get(top, [top])
    try:
        return f"{names[0]}=={importlib.metadata.version(names[0])}"
    except importlib.metadata.PackageNotFoundError:
        return f"{top}==?"


_CLOSURES: dict[str, tuple[tuple[str, str], ...]] = {}
_FILES: dict[str, Path | None] = {}  # the closures of one process ask again for every shared name


def closure(module: str) -> tuple[tuple[str, str], ...]:
    """(name, digest) of ``module`` and of everything it imports, transitively: a local source
    file by its content, an installed package by its distribution and version. One walk per
    module and process (``closure.cache_clear()`` forgets them, and where each name's file is)."""
    found = _CLOSURES.get(module)
    if found is None:
        found = _CLOSURES[module] = _walk(module)
    return found


def _forget() -> None:
    _CLOSURES.clear()
    _FILES.clear()


closure.cache_clear = _forget


def _walk(module: str) -> tuple[tuple[str, str], ...]:
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        if name not in _FILES:
            _FILES[name] = _file_of(name)
        path = _FILES[name]
        if path is None:  # a name imported from a module (a function, a class), or a built-in module
            continue
        if _installed(path):
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names:
                seen[top] = _distribution(top)
            continue
        text = path.read_bytes()
        content = hashlib.sha256(text).hexdigest()
        seen[name] = content[:20]
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        todo.extend(_IMPORTS.names(content, path, package, text))
    _IMPORTS.save()
    return tuple(sorted(seen.items()))


class _ImportsCache:
    """The names each source file imports, by its content and package: parsing every file of a
    closure again is most of an unchanged verify's planning (about 1 s on two cores). Kept in one
    file under ``build/imports/`` (``make clean`` removes it), named by this file's own content and
    the Python version (the parser); an unreadable or missing file means parsing again."""

    FOLDER = PROJECT_ROOT / "build" / "imports"

    def __init__(self) -> None:
        self.known: dict[str, list[str]] | None = None
        self.added = False
        own = hashlib.sha256(Path(__file__).read_bytes() + sys.version.encode()).hexdigest()[:16]
        self.name = f"imports-{own}.json"

    def names(self, content: str, path: Path, package: str, text: bytes) -> frozenset[str]:
        if self.known is None:
            try:
                found = json.loads((self.FOLDER / self.name).read_text())
                self.known = found if isinstance(found, dict) else {}
            except (OSError, ValueError):
                self.known = {}
        key = f"{content}:{package}"
        listed = self.known.get(key)
        if isinstance(listed, list):
            return frozenset(listed)
        names = _imported_names(path, package, text)
        self.known[key] = sorted(names)
        self.added = True
        return names

    def save(self) -> None:
        if not self.added:
            return
        self.added = False
        from reports import manifest, writer

        try:  # atomic and listed in the folder's manifest, like every file the harness writes
            writer.write_text(self.FOLDER, self.name, json.dumps(self.known))
        except (OSError, manifest.ForeignFileError):
            pass  # a read-only checkout, or a file of that name the harness did not write: parse every time


_IMPORTS = _ImportsCache()


@lru_cache(maxsize=None)
def harness_source() -> str:
    """A digest of the harness's own source: any change to the engine changes every key."""
    h = hashlib.sha256()
    for path in sorted((PROJECT_ROOT / "harness").rglob("*.py")):
        h.update(str(path.relative_to(PROJECT_ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:20]


def environment(backend: str, device: str) -> dict:
    import torch
    import triton

    name = torch.cuda.get_device_name(torch.device(device)) if backend == Backend.CUDA else "cpu"
    from harness.settings import current

    env = {"torch": torch.__version__, "triton": triton.__version__, "python": sys.version.split()[0],
           "backend": backend, "device": name}
    if backend != Backend.CUDA and current().later_calls_interpreter != "cover":  # which cases the later calls ran on
        env["later_calls"] = current().later_calls_interpreter
    return env
