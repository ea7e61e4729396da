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


def _docstring_problems(path: pathlib.Path) -> list[str]:
    """Google-style docstrings on a module's public functions, classes and public methods
    of public classes: a docstring; `Args:` where the function takes a parameter besides
    `self`/`cls`; `Returns:` (or `Yields:`) where its return annotation is not None (a
    property's is its value, not a return)."""

    def check(fn, qual: str) -> list[str]:
        doc = ast.get_docstring(fn)
        if not doc:
            return [f"{qual}: no docstring"]
        a = fn.args
        params = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x]
        out = []
        if set(params) - {"self", "cls"} and "Args:" not in doc:
            out.append(f"{qual}: no Args:")
        prop = any(
            getattr(d, "id", getattr(d, "attr", None)) in ("property", "cached_property", "setter")
            for d in fn.decorator_list
        )
        returns = fn.returns is not None and not (
            isinstance(fn.returns, ast.Constant) and fn.returns.value is None
        )
        if returns and not prop and "Returns:" not in doc and "Yields:" not in doc:
            out.append(f"{qual}: no Returns:")
        return out

    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    problems = []
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, functions) and not node.name.startswith("_"):
            problems += check(node, node.name)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            if not ast.get_docstring(node):
                problems.append(f"{node.name}: no docstring")
            for m in node.body:
                if isinstance(m, functions) and not m.name.startswith("_"):
                    problems += check(m, f"{node.name}.{m.name}")
    return [f"{path.relative_to(PKG)}:{p}" for p in problems]


def test_public_functions_and_classes_have_google_style_docstrings():
    problems = [p for path in sorted(PKG.rglob("*.py")) for p in _docstring_problems(path)]
    assert not problems, problems
