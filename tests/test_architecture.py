"""The layering of ARCHITECTURE.md, checked on the source: no import cycle anywhere in the
package, and the report reads runs without building models or parquet files.

Imports are read with ``ast`` (module level and inside functions alike; ``if TYPE_CHECKING:``
blocks are skipped, they never run). ``from a.b import c`` counts as an import of ``a.b.c``
when that is a module, else of ``a.b``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from pairrepro import paths

PACKAGE = paths.PROJECT_DIR / "pairrepro"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(path: Path) -> list[tuple[str, int, str]]:
    """(imported name, line, what the line imports) of every import that runs."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((full if full in MODULES else base, node.lineno,
                              f"{base}.{alias.name}"))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _graph() -> dict[str, dict[str, int]]:
    """module -> {imported pairrepro module: first line}."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in MODULES.items():
        edges = graph.setdefault(name, {})
        for target, line, _ in _imports(path):
            if target in MODULES and target != name:
                edges.setdefault(target, line)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    """The checker itself: a hand-made graph with one 3-cycle and a tail."""
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_import_cycle() -> None:
    graph = _graph()
    assert graph["pairrepro.train.evaluate"], "the import walk found nothing"
    offenders = []
    for component in _cycles(graph):
        inside = set(component)
        offenders.append(" / ".join(
            f"{m} -> {t} (line {line})" for m in component
            for t, line in sorted(graph[m].items()) if t in inside))
    assert not offenders, "import cycles:\n" + "\n".join(offenders)


def test_report_builds_no_models_and_reads_no_parquet() -> None:
    """The report reads run folders (run_folder) and committed data, never model code or
    prediction/prepared parquet files."""
    offenders = []
    for name, path in MODULES.items():
        if not name.startswith("pairrepro.report"):
            continue
        source = path.read_text(encoding="utf-8")
        for target, line, what in _imports(path):
            if target.startswith(("pairrepro.models", "pyarrow")):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line}: imports {what}")
        for n, text in enumerate(source.splitlines(), 1):
            if "read_parquet" in text:
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{n}: {text.strip()}")
    assert not offenders, "report reaches past the run folder:\n" + "\n".join(offenders)
