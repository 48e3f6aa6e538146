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
def _imported_names(path: Path, package: str) -> frozenset[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
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


@lru_cache(maxsize=None)
def closure(module: str) -> tuple[tuple[str, str], ...]:
    """(name, digest) of ``module`` and of everything it imports, transitively: a local source
    file by its content, an installed package by its distribution and version."""
    seen: dict[str, str] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _file_of(name)
        if path is None:  # a name imported from a module (a function, a class), or a built-in module
            continue
        if _installed(path):
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names:
                seen[top] = _distribution(top)
            continue
        seen[name] = hashlib.sha256(path.read_bytes()).hexdigest()[:20]
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        todo.extend(_imported_names(path, package))
    return tuple(sorted(seen.items()))


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
