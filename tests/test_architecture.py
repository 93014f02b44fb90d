"""The package's layers (docs/development.md): read from the source's imports, lazy ones included.

Lowest first: config (``config``, ``presets``, ``layers``, ``errors``), ``io``, ``core``, ``speed``, ``run``, then
the front ends ``cli``, ``web``, ``batch``, ``video``. An import points down or sideways within a layer, never up;
front ends never import each other (their command modules share the command-line kit ``cli.options``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "style_transfer"
RANK = {"config": 0, "presets": 0, "layers": 0, "errors": 0, "io": 1, "core": 2, "speed": 3, "run": 4,
        "retain_graph": 4, "cli": 5, "web": 5, "batch": 5, "video": 5}
FRONT_ENDS = ("cli", "web", "batch", "video")
# Modules of the root that only re-export from the layers, for code written before them (docs/api.md).
COMPATIBILITY = {"transfer", "losses", "models"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports (at the top or inside functions)."""
    files = {_module_name(f): f for f in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else (node.module or "")
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in files else base)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = {t for t in targets if t in files and t != name}
    return graph


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Imports from a layer to a higher one, and from one front end to another (but the kit ``cli.options``)."""
    found = set()
    for source, targets in graph.items():
        low = _layer(source)
        if low not in RANK:
            continue  # the package's __init__ and the compatibility re-exports
        for target in targets:
            high = _layer(target)
            if target == "style_transfer":
                continue  # the package itself: __version__ (its __init__ imports nothing until a name is asked for)
            if high not in RANK:
                found.add((source, target))  # into the root's re-exports or the package itself
            elif RANK[high] > RANK[low]:
                found.add((source, target))
            elif low in FRONT_ENDS and high in FRONT_ENDS and low != high:
                if not (source.endswith(".cli") and target == "style_transfer.cli.options"):
                    found.add((source, target))
    return found


def test_the_import_graph_has_no_cycle() -> None:
    assert _cycles(import_graph()) == []


def test_a_planted_cycle_and_upward_import_are_found() -> None:
    graph = {"style_transfer.io.images": {"style_transfer.run.run"}, "style_transfer.run.run": {"style_transfer.io.images"},
             "style_transfer.web.app": {"style_transfer.batch.items"}, "style_transfer.batch.items": set()}
    assert _cycles(graph) == [["style_transfer.io.images", "style_transfer.run.run"]]
    assert upward_imports(graph) == {("style_transfer.io.images", "style_transfer.run.run"),
                                     ("style_transfer.web.app", "style_transfer.batch.items")}


def test_imports_point_down_only() -> None:
    assert upward_imports(import_graph()) == set(), "imports that point up a layer or across front ends"


def test_the_package_root_holds_at_most_ten_modules() -> None:
    root = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(root) <= 10, root
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert folders == sorted(["config", "core", "io", "speed", "run", "cli", "web", "batch", "video"])


def test_the_compatibility_modules_only_re_export() -> None:
    for name in COMPATIBILITY:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        body = [node for node in tree.body if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]
        assert all(isinstance(node, ast.ImportFrom) for node in body), name


def test_old_paths_give_the_same_objects() -> None:
    import style_transfer
    from style_transfer import losses, models, transfer
    from style_transfer.core import losses as core_losses, transfer as core_transfer, vgg
    from style_transfer.run import Run, run, stylize

    assert transfer.run_style_transfer is core_transfer.run_style_transfer is style_transfer.run_style_transfer
    assert transfer.stylize is stylize is run.stylize is style_transfer.stylize
    assert losses.StyleLoss is core_losses.StyleLoss and models.load_network is vgg.load_network
    assert Run is run.Run is style_transfer.Run
