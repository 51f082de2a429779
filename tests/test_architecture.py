"""The layering of ARCHITECTURE.md, checked on the source: no import cycle anywhere in the
package, and the report reads runs (through ``pairrepro.runs``) without the trainer, model
code or parquet files. No function is longer than 100 lines, and only ``pairrepro.console``
builds a rich console.

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


def _imports(path: Path, type_only: bool = False) -> list[tuple[str, int, str]]:
    """(imported name, line, what the line imports) of every import that runs; with
    ``type_only`` also those of ``if TYPE_CHECKING:`` blocks."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_only:
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


def _graph(type_only: bool = False) -> dict[str, dict[str, int]]:
    """module -> {imported pairrepro module: first line} (``type_only``: see _imports)."""
    graph: dict[str, dict[str, int]] = {}
    for name, path in MODULES.items():
        edges = graph.setdefault(name, {})
        for target, line, _ in _imports(path, type_only):
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
    assert graph["pairrepro.train.provenance"], "the import walk found nothing"
    offenders = []
    for component in _cycles(graph):
        inside = set(component)
        offenders.append(" / ".join(
            f"{m} -> {t} (line {line})" for m in component
            for t, line in sorted(graph[m].items()) if t in inside))
    assert not offenders, "import cycles:\n" + "\n".join(offenders)


# what the report never imports: it reads run folders through pairrepro.runs and committed
# data, and neither trains, builds models nor opens parquet files itself
REPORT_FORBIDDEN = ("pairrepro.train", "pairrepro.models", "pyarrow")


def _import_offenders(package: str, forbidden: tuple[str, ...]) -> list[str]:
    """``file:line: imports name`` for every import of a ``forbidden`` module (or one under
    it) by a module of ``package``."""
    offenders = []
    for name, path in MODULES.items():
        if name != package and not name.startswith(f"{package}."):
            continue
        for target, line, what in _imports(path):
            if any(target == f or target.startswith(f"{f}.") for f in forbidden):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{line}: imports {what}")
    return offenders


def test_the_import_check_sees_a_lazy_import_of_the_trainer() -> None:
    """The checker itself: the CLI imports ``train.runner`` inside a command function, and
    the check finds that import."""
    found = _import_offenders("pairrepro.cli", ("pairrepro.train",))
    assert any("imports pairrepro.train.runner.train_recipe" in f for f in found), found


def test_report_imports_no_trainer_no_models_and_reads_no_parquet() -> None:
    """The report reads run folders (``pairrepro.runs``) and committed data, never the
    trainer, model code or prediction/prepared parquet files."""
    offenders = _import_offenders("pairrepro.report", REPORT_FORBIDDEN)
    for name, path in MODULES.items():
        if not name.startswith("pairrepro.report"):
            continue
        source = path.read_text(encoding="utf-8")
        for n, text in enumerate(source.splitlines(), 1):
            if "read_parquet" in text:
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{n}: {text.strip()}")
    assert not offenders, "report reaches past the run folder:\n" + "\n".join(offenders)


def test_pipeline_launch_and_train_import_nothing_of_the_report() -> None:
    """The report sits above what runs trainings: the pipeline, the launchers and the
    trainer take paper tables, the recipe index and the plan from ``pairrepro.planning``."""
    offenders = [found for package in ("pairrepro.pipeline", "pairrepro.launch",
                                       "pairrepro.train")
                 for found in _import_offenders(package, ("pairrepro.report",))]
    assert not offenders, "imports of the report from below it:\n" + "\n".join(offenders)


def test_the_report_check_sees_an_import_of_the_report() -> None:
    """The checker itself: the CLI imports the report, and the check finds it."""
    assert any("imports pairrepro.report." in f
               for f in _import_offenders("pairrepro.cli", ("pairrepro.report",)))


#: The longest a function of the package may be, its signature and docstring included.
MAX_FUNCTION_LINES = 100


def _long_functions(source: str, where: str) -> list[str]:
    """``where:line name (n lines)`` for every function (methods and nested ones included)
    longer than :data:`MAX_FUNCTION_LINES`, counted from ``def`` to its last line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_the_length_check_finds_a_long_method() -> None:
    """The checker itself: a method of 101 lines is found, one of 100 is not."""
    body = "\n".join(f"        x{i} = {i}" for i in range(98))
    source = f"class A:\n    def long(self):\n{body}\n        x = 0\n        return x\n"
    assert _long_functions(source, "a.py") == ["a.py:2 long (101 lines)"]
    assert _long_functions(source.replace("        x = 0\n", ""), "a.py") == []


def test_no_function_over_100_lines() -> None:
    offenders = [found for path in MODULES.values()
                 for found in _long_functions(path.read_text(encoding="utf-8"),
                                              str(path.relative_to(PACKAGE.parent)))]
    assert not offenders, ("functions over 100 lines (split them into named steps):\n"
                           + "\n".join(offenders))


def test_one_owner_of_the_consoles() -> None:
    """Only ``pairrepro.console`` builds a rich ``Console`` for output (every output follows
    the one quiet/json/width policy; a console given ``file=`` renders into a buffer, not to
    the user), and it imports nothing of pairrepro, so any layer may use it."""
    builders = []
    for name, path in MODULES.items():
        if name == "pairrepro.console":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call)
                    and getattr(node.func, "id", getattr(node.func, "attr", "")) == "Console"
                    and not any(k.arg == "file" for k in node.keywords)):
                builders.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not builders, "rich consoles built outside pairrepro.console:\n" + "\n".join(builders)
    assert not [t for t, _, _ in _imports(MODULES["pairrepro.console"])
                if t.startswith("pairrepro")]


def test_no_import_cycle_even_through_type_hints() -> None:
    """A circle kept alive only by ``if TYPE_CHECKING:`` (``tasks`` <-> ``data.batches``) is
    still two modules that each need the other to be understood."""
    cycles = _cycles(_graph(type_only=True))
    assert not cycles, "import cycles through type hints: " + "; ".join(map(" / ".join, cycles))


def test_nothing_below_the_cli_imports_it() -> None:
    """The CLI sits on top: the package's layers are used by it and never reach back up
    (``launch`` once took its console from ``cli.common``)."""
    offenders = [f"{path.relative_to(PACKAGE.parent)}:{line}: imports {what}"
                 for name, path in MODULES.items()
                 if not name.startswith("pairrepro.cli") and name != "pairrepro.__main__"
                 for target, line, what in _imports(path, type_only=True)
                 if target == "pairrepro.cli" or target.startswith("pairrepro.cli.")]
    assert not offenders, "imports of the CLI from below it:\n" + "\n".join(offenders)


def test_the_run_folder_package_imports_torch_only_for_checkpoints() -> None:
    """``pairrepro.runs`` is what the report reads runs through: it never imports the trainer
    or model code, and torch only for checkpoints (its ``checkpoints`` module) and the
    TensorBoard writer it opens in a run folder."""
    offenders = _import_offenders("pairrepro.runs", ("pairrepro.train", "pairrepro.models"))
    offenders += [f for f in _import_offenders("pairrepro.runs", ("torch",))
                  if not f.startswith("pairrepro/runs/checkpoints.py")
                  and not f.endswith("imports torch.utils.tensorboard.SummaryWriter")]
    assert not offenders, "pairrepro.runs reaches past the run folder:\n" + "\n".join(offenders)
