"""Import a base revision's kernels beside the working tree's.

A base *source* is one checked-out tree and the top-level names its code is imported under: for
the project, ``kernels``; for a plugin's repository, the modules and packages at its root, in
``src/`` and beside the plugin file (the harness engine's own packages excepted). Each source
gets a package of its own (``_baseline_kernels`` for the project, ``_baseline_<k>`` for a
plugin's repository); a module of the source is read from the base tree and its imports of the
source's names are rewritten (AST) to that package, so head and base modules coexist in one
process. The engine (``harness``, ``properties``, ``oracles``, ``reports``) and installed
libraries stay the head's. Each kernel the base registers becomes ``base:<name>`` with origin
``baseline``; ops the base declares are the head's (the contract is the working tree's).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.abc
import importlib.util
import hashlib
import json
import sys
from pathlib import Path
from vocabulary import EntryKind

BASE_PREFIX = "base:"
PROJECT_PACKAGE = "_baseline_kernels"
SOURCES_ENV = "HARNESS_BASELINE_SOURCES"  # the sources as JSON, read by the kernel process (autoload)
ENGINE = frozenset({"harness", "properties", "oracles", "reports"})


@dataclasses.dataclass(frozen=True)
class Source:
    """One base tree: ``names`` (top-level import name -> its file or package directory) are
    imported as ``package.<name>``; ``plugins`` are the base versions of plugin files in it."""

    package: str
    names: dict[str, str]
    plugins: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"package": self.package, "names": self.names, "plugins": list(self.plugins)}

    @classmethod
    def from_json(cls, data: dict) -> "Source":
        return cls(data["package"], dict(data["names"]), tuple(data["plugins"]))


def importable(directory: Path) -> dict[str, str]:
    """The top-level modules and packages of a directory: name -> path."""
    found = {}
    if directory.is_dir():
        for path in sorted(directory.iterdir()):
            if path.suffix == ".py" and path.stem.isidentifier():
                found[path.stem] = str(path)
            elif path.is_dir() and (path / "__init__.py").is_file() and path.name.isidentifier():
                found[path.name] = str(path)
    return found


def source(tree: Path, plugins: list[Path], *, package: str) -> Source:
    """The base tree of the project (``package`` PROJECT_PACKAGE: its ``kernels`` and the plugins'
    neighbours come from the base) or of a plugin's own repository (its root's, ``src/``'s and
    the plugins' neighbours); ``plugins`` are the plugin files' paths inside ``tree``."""
    project = package == PROJECT_PACKAGE
    names: dict[str, str] = {}
    roots = [] if project else [tree, tree / "src"]
    for directory in roots + sorted({p.parent for p in plugins}):
        names.update(importable(directory))
    if project:
        names["kernels"] = str(tree / "kernels")
    for engine in ENGINE:
        names.pop(engine, None)
    for plugin in plugins:
        names.pop(plugin.stem, None)  # a plugin is loaded as a plugin, not as a neighbour
    return Source(package, names, tuple(str(p) for p in plugins))


class _Rewrite(ast.NodeTransformer):
    """Imports of the source's names -> the source's package (``import a.b`` keeps binding ``a``)."""

    def __init__(self, source: Source):
        self.source = source

    def _name(self, name: str) -> str | None:
        head = name.split(".", 1)[0]
        return f"{self.source.package}.{name}" if head in self.source.names else None

    def visit_Import(self, node: ast.Import):
        out: list[ast.stmt] = []
        for alias in node.names:
            target = self._name(alias.name)
            if target is None:
                out.append(ast.Import(names=[alias]))
            elif alias.asname or "." not in alias.name:
                out.append(ast.Import(names=[ast.alias(target, alias.asname or alias.name)]))
            else:  # import a.b binds a: import the rewritten module, then bind a to its top package
                top = alias.name.split(".", 1)[0]
                out.append(ast.Import(names=[ast.alias(target)]))
                out.append(ast.parse(f"{top} = __import__('sys').modules[{self.source.package + '.' + top!r}]").body[0])
        return [ast.copy_location(n, node) for n in out]

    def visit_ImportFrom(self, node: ast.ImportFrom):
        if node.level == 0 and node.module and self._name(node.module):
            node.module = self._name(node.module)
        return node


class _Loader(importlib.abc.Loader):
    def __init__(self, path: Path, source: Source):
        self.path, self.source = path, source

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        tree = ast.fix_missing_locations(_Rewrite(self.source).visit(ast.parse(self.path.read_text(), str(self.path))))
        saved = list(sys.path)
        try:  # the real file name: Triton and inspect read the kernel's source lines from it
            exec(compile(tree, str(self.path), "exec"), module.__dict__)
        finally:
            sys.path[:] = saved  # a base module's sys.path insertions must not steer the head's imports


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, source: Source):
        self.source = source

    def find_spec(self, fullname, path=None, target=None):
        package = self.source.package
        if fullname == package:
            spec = importlib.util.spec_from_loader(fullname, None, is_package=True)
            spec.submodule_search_locations = []
            return spec
        if not fullname.startswith(package + "."):
            return None
        top, *rest = fullname[len(package) + 1:].split(".")
        if top not in self.source.names:
            return None
        base = Path(self.source.names[top]).joinpath(*rest) if rest else Path(self.source.names[top])
        if base.suffix == ".py" and base.is_file():
            file, is_package = base, False
        elif base.is_dir():
            file, is_package = base / "__init__.py", True
        elif base.with_suffix(".py").is_file():
            file, is_package = base.with_suffix(".py"), False
        else:
            return None
        if is_package and not file.is_file():  # a namespace directory
            spec = importlib.util.spec_from_loader(fullname, None, is_package=True)
        else:
            spec = importlib.util.spec_from_loader(fullname, _Loader(file, self.source), origin=str(file),
                                                   is_package=is_package)
            spec.has_location = True
        if is_package:
            spec.submodule_search_locations = [str(base)]
        return spec


def _install(source: Source) -> None:
    if not any(isinstance(f, _Finder) and f.source.package == source.package for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder(source))


def _import_plugin(source: Source, path: Path) -> None:
    from harness.errors import PluginError

    name = f"{source.package}.__plugin_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_loader(name, _Loader(path, source), origin=str(path))
    spec.has_location = True
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the base's plugin is user code too: a clean error, not a traceback
        del sys.modules[name]
        raise PluginError(f"the base revision's plugin {path} failed to import: {type(exc).__name__}: {exc}") from None


def load_base(sources: list[Source]) -> list:
    """Import each source's kernels (the project's ``kernels`` package) and plugins; register
    and return the ``base:<name>`` entries (those of an op the head does not have are returned
    unregistered: they can only be reported as removed)."""
    from harness.registry.registry import REGISTRY, Origin

    entries = []
    for source in sources:
        _install(source)
        importlib.import_module(source.package)
        with REGISTRY.capturing() as captured, REGISTRY.keeping_ops():
            if source.package == PROJECT_PACKAGE:
                kernels = Path(source.names["kernels"])
                for path in sorted(kernels.glob("*.py")):
                    if not path.stem.startswith("_"):
                        importlib.import_module(f"{source.package}.kernels.{path.stem}")
            for plugin in source.plugins:
                _import_plugin(source, Path(plugin))
        for entry in captured:
            if entry.kind is not EntryKind.KERNEL:
                continue
            based = dataclasses.replace(entry, name=BASE_PREFIX + entry.name, origin=Origin.BASELINE)
            entries.append(REGISTRY.add(based) if entry.op in REGISTRY.ops else based)
    return entries


def sources_to_env(sources: list[Source]) -> str:
    return json.dumps([s.to_json() for s in sources])


def sources_from_env(text: str) -> list[Source]:
    return [Source.from_json(d) for d in json.loads(text)]


