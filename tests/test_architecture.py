"""The code's shape: stages import components, never each other; functions stay short."""

from __future__ import annotations

import ast
from pathlib import Path

import dfsu

SRC = Path(dfsu.__file__).parent
# One stage function each (the pipeline's order); everything else but the orchestrators is a
# component.
STAGES = {
    "dfsu.corpus",
    "dfsu.target",
    "dfsu.inversion.train",
    "dfsu.synthesis",
    "dfsu.unlearning.trainer",
    "dfsu.evaluation.evaluate",
    "dfsu.report",
}
ORCHESTRATORS = {
    "dfsu.cli",
    "dfsu.pipeline",
    "dfsu.results",
    "dfsu.sweep",
    "dfsu.forget",
    "dfsu.__main__",
}


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


def test_the_stage_list_names_real_modules():
    assert set(_modules()) >= STAGES


def test_no_stage_imports_another_stage_and_no_component_imports_a_stage():
    offenders = []
    for name, path in _modules().items():
        if name in ORCHESTRATORS:
            continue
        for imported in _imports(path) & STAGES:
            if imported != name:
                offenders.append(f"{name} imports {imported}")
    assert not offenders, offenders


def test_no_function_is_longer_than_100_lines():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 100:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert not long, long
