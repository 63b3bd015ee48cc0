"""The code's shape: stages import components, never each other; functions and modules stay
short."""

from __future__ import annotations

import ast
from pathlib import Path

import dfsu

SRC = Path(dfsu.__file__).parent
# One module per stage under dfsu.stages, each one stage function (the pipeline's order);
# everything else but the orchestrators is a library module.
STAGES = {f"dfsu.stages.{p.stem}" for p in (SRC / "stages").glob("*.py") if p.stem != "__init__"}
ORCHESTRATORS = {
    "dfsu.pipeline",
    "dfsu.stage_runner",
    "dfsu.rows",
    "dfsu.results",
    "dfsu.sweep",
    "dfsu.forget",
}
# The command line is a package, a module per command group: every module in it orchestrates.
ORCHESTRATOR_PACKAGES = {"dfsu.cli"}


def _orchestrates(module: str) -> bool:
    return module in ORCHESTRATORS or any(
        module == p or module.startswith(f"{p}.") for p in ORCHESTRATOR_PACKAGES
    )


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(path: Path) -> set[str]:
    """Every dfsu module a file imports, at module level or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dfsu"):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("dfsu")}
    return found


def test_the_stages_are_the_pipelines_seven():
    assert {name.rsplit(".", 1)[1] for name in STAGES} == {
        "corpus",
        "target",
        "inverter",
        "synthesis",
        "unlearn",
        "evaluate",
        "report",
    }


def _node(module: str) -> str:
    """A module's node in the package graph: its package, or itself at the top level."""
    return module.split(".")[1] if "." in module else module


def test_no_package_level_import_cycle():
    """Packages (and the top-level modules, each its own node) form a DAG: the config and the
    run directory below the components, the components below pii, pii below inversion,
    evaluation and unlearning, those below the stages, the orchestrators on top."""
    graph: dict[str, set[str]] = {}
    modules = _modules()
    for name, path in modules.items():
        if name == "dfsu":
            continue
        for imported in _imports(path):
            a, b = _node(name), _node(imported)
            if a != b and imported != "dfsu" and imported in modules:
                graph.setdefault(a, set()).add(b)
    assert not _cycles(graph), _cycles(graph)


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """The import cycles a depth-first walk of ``graph`` meets, each as ``a -> b -> a``."""
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt in trail:
                cycles.append(" -> ".join(trail[trail.index(nxt) :] + [nxt]))
            elif nxt not in done:
                visit(nxt, trail + [nxt])
        done.add(node)

    done: set[str] = set()
    for node in sorted(graph):
        if node not in done:
            visit(node, [node])
    return cycles


def test_no_module_level_import_cycle():
    """Modules, not only packages, form a DAG, whether an import sits at the top of a file,
    inside a function or under TYPE_CHECKING (breaks: the tagger's halves importing each
    other's private names; the loop, the single run and the checks importing each other)."""
    modules = _modules()
    graph = {
        name: {m for m in _imports(path) if m in modules and m not in (name, "dfsu")}
        for name, path in modules.items()
        if name != "dfsu"
    }
    # a package's __init__ re-exporting its modules is no cycle with them
    for name in graph:
        graph[name] = {m for m in graph[name] if not name.startswith(f"{m}.")}
    assert not _cycles(graph), _cycles(graph)


def test_no_stage_imports_another_stage_and_no_component_imports_a_stage():
    offenders = []
    for name, path in _modules().items():
        if _orchestrates(name):
            continue
        for imported in _imports(path) & STAGES:
            if imported != name:
                offenders.append(f"{name} imports {imported}")
    assert not offenders, offenders


def test_no_function_is_longer_than_80_lines():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 80:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert not long, long


def test_no_module_is_longer_than_500_lines():
    long = []
    for name, path in _modules().items():
        lines = len(path.read_text().splitlines())
        if lines > 500:
            long.append(f"{name}: {lines} lines")
    assert not long, long


def test_only_the_corpus_stage_reads_the_unknown_shapes():
    """The record shapes of ``data.shapes: unknown`` are the simulation's secret: a data-free
    module that imported them would let the owner's side prompt with the shapes it must find."""
    readers = {
        name
        for name, path in _modules().items()
        if any(m == "dfsu.simulation" or m.startswith("dfsu.simulation.") for m in _imports(path))
        and not name.startswith("dfsu.simulation")
    }
    assert readers == {"dfsu.stages.corpus"}
