"""Import a base revision's kernel modules beside the working tree's.

The base's ``kernels/<m>.py`` is imported as ``_baseline_kernels.<m>``: its source is read
from the base worktree and its imports of ``kernels`` / ``kernels.X`` are rewritten (AST) to
the prefixed package, so head and base modules coexist in one process. The harness engine
(``harness``, ``properties``, ``oracles``) stays the head's. Each kernel the base registers
becomes the entry ``base:<name>`` with origin ``baseline``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path

BASE_PREFIX = "base:"
PACKAGE = "_baseline_kernels"
ROOT_ENV = "HARNESS_BASELINE_ROOT"  # the base worktree, read by the kernel process (harness.baseline.autoload)


class _Rewrite(ast.NodeTransformer):
    """``kernels`` and ``kernels.X`` in import statements -> the prefixed package."""

    @staticmethod
    def _name(name: str) -> str:
        if name == "kernels" or name.startswith("kernels."):
            return PACKAGE + name[len("kernels"):]
        return name

    def visit_Import(self, node: ast.Import) -> ast.AST:
        for alias in node.names:
            alias.name = self._name(alias.name)
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        if node.level == 0 and node.module:
            node.module = self._name(node.module)
        return node


class _Loader(importlib.abc.Loader):
    def __init__(self, path: Path):
        self.path = path

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        source = self.path.read_text()
        tree = _Rewrite().visit(ast.parse(source, filename=str(self.path)))
        # the real file name: Triton and inspect read the kernel's source lines from it
        exec(compile(tree, str(self.path), "exec"), module.__dict__)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, kernels_dir: Path):
        self.dir = kernels_dir

    def find_spec(self, fullname, path=None, target=None):
        if fullname != PACKAGE and not fullname.startswith(PACKAGE + "."):
            return None
        rel = fullname[len(PACKAGE):].lstrip(".").replace(".", "/")
        base = self.dir / rel if rel else self.dir
        if base.is_dir():
            init = base / "__init__.py"
            spec = importlib.util.spec_from_loader(fullname, _Loader(init), is_package=True)
            spec.submodule_search_locations = [str(base)]
            spec.origin = str(init)
            return spec
        file = base.with_suffix(".py")
        if file.is_file():
            spec = importlib.util.spec_from_loader(fullname, _Loader(file), origin=str(file))
            spec.has_location = True
            return spec
        return None


def base_modules(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / "kernels").glob("*.py") if not p.stem.startswith("_"))


def load_base_kernels(root: str | os.PathLike) -> list:
    """Import the base revision's kernels from the worktree ``root``; register and return
    their ``base:<name>`` entries."""
    from harness.registry.registry import REGISTRY

    root = Path(root)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(root / "kernels"))
    entries = []
    with REGISTRY.capturing() as captured:
        for name in base_modules(root):
            importlib.import_module(f"{PACKAGE}.{name}")
    for entry in captured:
        if entry.kind != "kernel":
            continue
        based = dataclasses.replace(entry, name=BASE_PREFIX + entry.name, origin="baseline")
        entries.append(REGISTRY.add(based))
    return entries
