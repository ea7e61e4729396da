"""The package's layers (docs/architecture.md): which subpackage may import which, no import
circle between modules, and no function over 80 lines in `analysis/`. Read from the source
(every `import`, also inside functions), so a lazy import cannot hide a violation."""

import ast
import pathlib

import networkx as nx
import pytest


PKG = pathlib.Path(__file__).resolve().parent.parent / "gt4py_dace_xforms"

#: layer -> the layers it may import (itself included). Modules at the top level of the
#: package (`report`, `backends`, `__init__`) are the public surface; `version` (one
#: constant) may be imported by every layer.
ALLOWED = {
    "version": set(),
    "analysis": {"analysis"},
    "policy": {"policy", "analysis", "report"},
    "report": set(),
    "transformations": {"transformations", "analysis", "policy", "report"},
    "integration": {"integration", "transformations", "analysis", "policy", "report"},
    "tools": {"tools", "integration", "transformations", "analysis", "policy", "report"},
    "measure": {
        "measure",
        "tools",
        "integration",
        "transformations",
        "analysis",
        "policy",
        "report",
    },
    "cli": {
        "cli",
        "measure",
        "tools",
        "integration",
        "transformations",
        "analysis",
        "policy",
        "report",
    },
}


def _module(path: pathlib.Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: pathlib.Path) -> set[str]:
    found = set()
    tree = ast.parse(path.read_text())
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m.startswith("gt4py_dace_xforms")}


MODULES = {_module(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolved(name: str) -> str | None:
    """The module an imported name refers to (`pkg.mod.func` -> `pkg.mod`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _layer(m) in ALLOWED))
def test_module_imports_only_lower_layers(module):
    layer = _layer(module)
    bad = sorted(
        {_resolved(n) for n in _imports(MODULES[module])}
        - {None}
        - {m for m in MODULES if _layer(m) in ALLOWED[layer] | {"", "version"}}
        - ({"gt4py_dace_xforms"} if layer in ("cli",) else set())
    )
    assert not bad, f"{module} ({layer}) imports {bad}"


def test_glue_never_imports_measurement_or_tools():
    glue = [m for m in MODULES if _layer(m) == "integration"]
    for m in glue:
        used = {_resolved(n) for n in _imports(MODULES[m])} - {None}
        assert not {u for u in used if _layer(u) in ("measure", "tools", "cli")}, m


def test_no_import_circle():
    graph = nx.DiGraph()
    for m, path in MODULES.items():
        for n in _imports(path):
            target = _resolved(n)
            # A package's __init__ re-exports its modules: importing a sibling through it
            # is not a dependency of the package on the importer.
            if (
                target
                and target != m
                and not (MODULES[target].name == "__init__.py" and m.startswith(target + "."))
            ):
                graph.add_edge(m, target)
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, cycles[:5]


def test_no_function_in_analysis_over_80_lines():
    long = []
    for path in (PKG / "analysis").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 80:
                    long.append(f"{path.name}:{node.name} ({n} lines)")
    assert not long, long
