"""The import graph of the project's packages. Bug classes: an import cycle (modules that can
only be understood, and imported, together), and imports that break the verifier's independence
(an oracle that uses a kernel can agree with a wrong kernel; a kernel that calls its oracle passes
by construction; a report that imports the engine can judge instead of read records)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("harness", "vocabulary", "kernels", "oracles", "properties", "reports", "bench")
# (importer prefix, imported prefix, why it is forbidden)
FORBIDDEN = [
    ("oracles", "kernels", "an oracle never uses a kernel"),
    ("kernels", "oracles", "a kernel never calls its oracle"),
    ("reports", "harness", "reports read records (JSON) only"),
    ("reports", "kernels", "reports read records (JSON) only"),
    ("reports", "oracles", "reports read records (JSON) only"),
    ("reports", "properties", "reports read records (JSON) only"),
    ("harness", "kernels", "the engine finds kernels through the registry (harness.registry.discovery)"),
    ("harness", "bench", "the engine finds benches through harness.registry.discovery"),
    ("harness", "oracles", "the engine reaches oracles through op specs"),
    ("harness", "properties", "the engine finds op declarations and catalogs by module name (harness.registry.discovery); "
                              "the engine's own modules live in harness.ops"),
    *(("vocabulary", other, "the shared vocabulary imports nothing of the project")
      for other in ("harness", "kernels", "oracles", "properties", "reports", "bench")),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[module_name(path)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules ``name`` imports, at any depth of its code (lazy imports count too)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {name: imports_of(name, path, known) for name, path in modules.items()}


def _is_package_init(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def cycles(edges: dict[str, set[str]], modules: dict[str, Path]) -> list[list[str]]:
    """Cycles between modules (Tarjan's strongly connected components). A package's __init__
    is left out: importing ``a.b`` runs ``a/__init__`` first, which is not a dependency."""
    edges = {n: {m for m in e if not _is_package_init(m, modules)} for n, e in edges.items()
             if not _is_package_init(n, modules)}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_real_imports():
    # guards the test itself: a parser that found no edges would pass every rule below
    edges = graph()
    assert "harness.registry.registry" in edges["harness.registry.loader"]
    assert "harness.compare.allclose" in edges["harness.ops.checks"]
    assert "harness.ops.derive" in edges["properties.ops.attention"]


def test_no_import_cycles():
    found = cycles(graph(), project_modules())
    assert not found, "import cycles (each line a set of modules that import each other): " + "; ".join(
        " <-> ".join(c) for c in found)


def breaches(edges: dict[str, set[str]]) -> list[str]:
    broken = []
    for importer, targets in edges.items():
        for target in targets:
            for src, dst, why in FORBIDDEN:
                if (importer == src or importer.startswith(src + ".")) and (target == dst or target.startswith(dst + ".")):
                    broken.append(f"{importer} imports {target}: {why}")
    return sorted(broken)


def test_independence_rules():
    broken = breaches(graph())
    assert not broken, "\n".join(broken)


def test_reports_and_the_engine_share_one_vocabulary():
    # the names across the JSON boundary: reports read records only, yet name statuses, verdicts
    # and the score as the engine does, by importing the neutral package
    edges = graph()
    for module in ("reports.verify_report", "reports.merge", "reports.mutation_report", "harness.mutation.campaign"):
        assert "vocabulary" in edges[module], module
    assert edges["vocabulary.score"] == {"vocabulary.names"}


DOC = ROOT / "docs/ARCHITECTURE.md"
DOC_PATH = re.compile(r"`((?:harness|vocabulary|properties|reports|kernels|oracles|bench|examples|tests|scripts)/[\w/.-]+)`")


def undocumented(doc: str) -> list[str]:
    """The engine's modules (harness/, vocabulary/) that docs/ARCHITECTURE.md names nowhere, by
    path or by file name in its package's row."""
    modules = [p for package in ("harness", "vocabulary") for p in (ROOT / package).rglob("*.py") if p.name != "__init__.py"]
    return sorted(str(p.relative_to(ROOT)) for p in modules
                  if str(p.relative_to(ROOT)) not in doc and f"`{p.name}`" not in doc and f"{p.name} " not in doc)


def test_the_architecture_doc_names_every_module_and_only_modules_that_exist():
    # bug class: a map of the code that drifted from it (a module added and never placed, a
    # module moved and still named where it was)
    doc = DOC.read_text()
    named = set(DOC_PATH.findall(doc))
    assert len(named) > 50, "the pattern found no paths: the check would pass on any document"
    gone = sorted(p for p in named if not (ROOT / p.rstrip("/")).exists())
    assert not gone, f"docs/ARCHITECTURE.md names paths that do not exist: {gone}"
    missing = undocumented(doc)
    assert not missing, f"docs/ARCHITECTURE.md does not place these modules: {missing}"


def test_the_doc_check_sees_a_missing_module():
    doc = DOC.read_text()
    assert undocumented(doc) == []
    assert "harness/verify/session.py" in undocumented(doc.replace("harness/verify/session.py", "").replace("`session.py`", ""))


def test_an_import_of_properties_anywhere_in_an_engine_module_breaks_the_rules(tmp_path):
    # bug class: the engine depending on the op declarations again, through an import hidden in a
    # function (a lazy import is as much a dependency as one at the top)
    source = tmp_path / "lazy.py"
    source.write_text("import math\n\ndef f():\n    if math.pi:\n        from properties.ops import rmsnorm\n"
                      "        return rmsnorm\n")
    known = set(project_modules())
    targets = imports_of("harness.run.lazy", source, known)
    assert "properties.ops.rmsnorm" in targets
    hits = breaches({"harness.run.lazy": targets})
    assert hits and all("by module name" in hit for hit in hits), hits
    assert breaches({"harness.run.lazy": targets - {t for t in targets if t.startswith("properties")}}) == []


def test_the_rules_catch_a_forbidden_import(tmp_path):
    # the rule set itself must fail on a breach: an oracle importing a kernel
    fake = {"oracles.x": {"kernels.rmsnorm"}}
    hits = [why for importer, targets in fake.items() for t in targets for src, dst, why in FORBIDDEN
            if importer.startswith(src) and t.startswith(dst)]
    assert hits == ["an oracle never uses a kernel"]
    modules = {"a": tmp_path / "a.py", "b": tmp_path / "b.py"}
    assert cycles({"a": {"b"}, "b": {"a"}}, modules) == [["a", "b"]]
