"""The package's modules import each other without cycles, lazy imports included."""

import ast
from pathlib import Path

import rosetree

PACKAGE = Path(rosetree.__file__).parent


def _imports(path):
    """Modules of the package that ``path`` imports, wherever the import statement is."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
    return found - {"_core"}


def test_no_module_imports_itself_through_others():
    graph = {p.stem: _imports(p) for p in PACKAGE.glob("*.py")}
    # Depth-first search for a back edge.
    state = {}

    def visit(module, path):
        state[module] = "open"
        for dep in sorted(graph.get(module, ())):
            assert state.get(dep) != "open", "import cycle: " + " -> ".join([*path, dep])
            if dep not in state:
                visit(dep, [*path, dep])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert "learning" in graph["estimators"] and "estimators" not in graph["learning"]
