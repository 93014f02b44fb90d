"""The package's layers (docs/development.md): read from the source's imports, lazy ones included.

Lowest first, a folder per concept: 0 ``config`` (with the root's ``presets``, ``layers``, ``errors``, ``step_hooks``
(the loop's hook points, which losses and core implement); ``config`` holds the torch-free ``weights`` and
``onnx_graph``, which ``StyleConfig`` asks what a weights file tells), 1 ``io``, 2 ``networks`` and ``losses``,
3 ``core``, 4 ``fast``, 5 ``tiling`` and the root's ``memory`` (a run's memory estimate, which tiles are planned by),
6 ``run`` (and ``retain_graph``), 7 the front ends ``cli``, ``web``, ``batch``, ``video``. An import points down or
sideways within a layer, never up; front ends never import each other (their command modules share the command-line
kit ``cli.options``). Nor may the folders import each other in a cycle, whatever rank a single module has.
``benchmarks/`` imports the package, never the other way, and its modules import each other in no cycle.

One address per name: no module re-exports another's names, but the package root (its public API). A module
re-exports a name it imports from another module of the package when it lists it in ``__all__`` or never uses it
(it is there only to be imported from here); and only the root may have a module ``__getattr__``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "style_transfer"
BENCHMARKS = PACKAGE.parent / "benchmarks"  # may import the package; the package never imports it
RANK = {"config": 0, "presets": 0, "layers": 0, "errors": 0, "step_hooks": 0, "io": 1, "networks": 2, "losses": 2,
        "core": 3, "fast": 4, "tiling": 5, "memory": 5, "run": 6, "retain_graph": 6, "cli": 7, "web": 7, "batch": 7,
        "video": 7}
FRONT_ENDS = ("cli", "web", "batch", "video")


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_imports(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of ``package`` -> every module it imports (at the top or inside functions), absolute names."""
    files = {_module_name(f, package): f for f in package.rglob("*.py")}
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
        graph[name] = targets - {name}
    return graph


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of ``package`` it imports."""
    graph = all_imports(package)
    return {name: {t for t in targets if t in graph} for name, targets in graph.items()}


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The package's folders (and root modules) -> those their modules import: an arrow up between two folders
    shows as a cycle here, whatever rank a single module is given."""
    folders: dict[str, set[str]] = {}
    for source, targets in graph.items():
        folders.setdefault(_layer(source), set()).update(_layer(t) for t in targets if _layer(t) != _layer(source))
    return folders


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _rank(module: str) -> int | None:
    return RANK.get(_layer(module))


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
            continue  # the package's __init__
        for target in targets:
            high = _layer(target)
            if target == "style_transfer":
                continue  # the package itself: __version__ (its __init__ imports nothing until a name is asked for)
            if high not in RANK:
                found.add((source, target))  # into a root module no layer holds
            elif _rank(target) > _rank(source):
                found.add((source, target))
            elif low in FRONT_ENDS and high in FRONT_ENDS and low != high:
                if not (source.endswith(".cli") and target == "style_transfer.cli.options"):
                    found.add((source, target))
    return found


def test_the_import_graph_has_no_cycle() -> None:
    assert _cycles(import_graph()) == []


def test_the_folders_import_each_other_in_no_cycle() -> None:
    assert _cycles(folder_graph(import_graph())) == []


def test_the_benchmarks_import_in_no_cycle_and_the_package_never_imports_them() -> None:
    assert _cycles(import_graph(BENCHMARKS)) == []
    assert not {(source, target) for source, targets in all_imports().items() for target in targets
                if target.partition(".")[0] == "benchmarks"}


def test_a_planted_cycle_and_upward_import_are_found() -> None:
    graph = {"style_transfer.io.images": {"style_transfer.run.run"}, "style_transfer.run.run": {"style_transfer.io.images"},
             "style_transfer.web.app": {"style_transfer.batch.items"}, "style_transfer.batch.items": set()}
    assert _cycles(graph) == [["style_transfer.io.images", "style_transfer.run.run"]]
    assert _cycles(folder_graph(graph)) == [["io", "run"]]
    assert upward_imports(graph) == {("style_transfer.io.images", "style_transfer.run.run"),
                                     ("style_transfer.web.app", "style_transfer.batch.items")}


def test_imports_point_down_only() -> None:
    assert upward_imports(import_graph()) == set(), "imports that point up a layer or across front ends"


def test_the_package_root_holds_at_most_ten_modules() -> None:
    root = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(root) <= 10, root
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert folders == sorted(["config", "io", "networks", "losses", "core", "fast", "tiling", "run", "cli", "web",
                              "batch", "video"])


def re_exports(path: Path) -> set[str]:
    """The names ``path`` imports from other modules of the package and lists in ``__all__`` or never uses."""
    tree = ast.parse(path.read_text())
    imported: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("style_transfer")):
            for alias in node.names:
                imported[alias.asname or alias.name] = node.lineno
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    listed: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            listed = {e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return {name for name in imported if name not in used or name in listed}


def test_no_module_re_exports_another_modules_names() -> None:
    found = {f"{_module_name(path)}: {name}" for path in PACKAGE.rglob("*.py") if path != PACKAGE / "__init__.py"
             for name in re_exports(path)}
    assert not found, sorted(found)


def test_only_the_package_root_has_a_module_getattr() -> None:
    found = [_module_name(path) for path in PACKAGE.rglob("*.py")
             if any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
                    for node in ast.parse(path.read_text()).body)]
    assert found == ["style_transfer"]


def test_a_planted_re_export_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from .a import used, unused\nfrom ..b import listed\nimport os\n__all__ = ['listed']\n"
                      "def f():\n    return used(os)\n")
    assert re_exports(module) == {"unused", "listed"}


def test_the_tutorial_names_import_from_the_package_root() -> None:
    import style_transfer
    from style_transfer.core.style_model import get_style_model_and_losses
    from style_transfer.core.transfer import run_style_transfer
    from style_transfer.losses.tutorial import ContentLoss, StyleLoss, gram_matrix
    from style_transfer.run.run import Run, stylize

    assert (style_transfer.gram_matrix, style_transfer.ContentLoss, style_transfer.StyleLoss) == \
        (gram_matrix, ContentLoss, StyleLoss)
    assert style_transfer.get_style_model_and_losses is get_style_model_and_losses
    assert style_transfer.run_style_transfer is run_style_transfer
    assert style_transfer.stylize is stylize and style_transfer.Run is Run
    for name in style_transfer.__all__:
        assert getattr(style_transfer, name) is not None, name


def pointer_faults(path: Path) -> list[str]:
    """What ``path``'s text points to that a reader cannot follow or reads twice: an issue number (the issues are
    not in the repository), or the notebook named more than once (a module says where its history is, once)."""
    text = path.read_text(encoding="utf-8")
    faults = [f"{path.name}: {match.group(0)!r}" for match in re.finditer(r"\b[Ii]ssues? \d+(\.\d+)?", text)]
    if text.count("NOTEBOOK") > 1:
        faults.append(f"{path.name}: the notebook named {text.count('NOTEBOOK')} times")
    return faults


def test_no_module_points_to_an_issue_or_to_the_notebook_twice() -> None:
    faults = [fault for root in (PACKAGE, BENCHMARKS) for path in sorted(root.rglob("*.py"))
              for fault in pointer_faults(path)]
    assert faults == []


def test_a_planted_pointer_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""As measured (issue 12.3; benchmarks/NOTEBOOK.md)."""\n# see benchmarks/NOTEBOOK.md\n')
    assert pointer_faults(module) == ["m.py: 'issue 12.3'", "m.py: the notebook named 2 times"]
