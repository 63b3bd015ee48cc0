"""The code's shape: the simulation around the owner's path, never in it; stages import
components, never each other; functions and modules stay short."""

from __future__ import annotations

import ast
from pathlib import Path

import dfsu

SRC = Path(dfsu.__file__).parent
# The simulation is one package around the owner's path: the corpus and the target that
# memorizes it, the rows of `dfsu run` and their results, sweeps, the record shapes the owner
# never has. Outside it, only the command groups that run it import it (`dfsu run`, `sweep`,
# `demo`; `build-corpus`, `train-target`).
SIMULATION = "dfsu.simulation"
RUN_THE_SIMULATION = {"dfsu.cli.run", "dfsu.cli.stages"}
# One module per stage, each one stage function: the owner's (and the evaluator's) under
# dfsu.stages, the simulation's corpus and target under dfsu.simulation.stages; everything
# else but the orchestrators is a library module.
STAGES = {
    f"{package}.{p.stem}"
    for package in ("dfsu.stages", "dfsu.simulation.stages")
    for p in SRC.joinpath(*package.split(".")[1:]).glob("*.py")
    if p.stem != "__init__"
}
ORCHESTRATORS = {
    "dfsu.stage_runner",
    "dfsu.simulation.pipeline",
    "dfsu.simulation.rows",
    "dfsu.simulation.results",
    "dfsu.simulation.sweep",
}
# The command line is a package, a module per command group, and the owner's side is one
# (`dfsu forget`, its stages, checks, summary and page): every module in them orchestrates.
ORCHESTRATOR_PACKAGES = {"dfsu.cli", "dfsu.owner"}
# The owner's side: `dfsu forget` and what it runs (the runner, the stage table, the owner's
# stages). What it imports, transitively, never builds a corpus, a target or an oracle's data,
# nor knows the simulation's rows and results: it reaches no module of the simulation.
OWNER_SIDE = ("dfsu.owner.forget", "dfsu.owner.stages", "dfsu.stage_runner", "dfsu.stage_table")


def _simulation(module: str) -> bool:
    return module == SIMULATION or module.startswith(f"{SIMULATION}.")


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


def test_the_stages_are_the_pipelines_nine():
    simulation = {f"dfsu.simulation.stages.{s}" for s in ("corpus", "target")}
    names = ("seal", "tagger", "inverter", "synthesis", "unlearn", "evaluate", "report")
    owner = {f"dfsu.stages.{s}" for s in names}
    assert simulation | owner == STAGES


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


def test_no_function_is_longer_than_60_lines():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > 60:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert not long, long


def test_no_module_is_longer_than_400_lines():
    long = []
    for name, path in _modules().items():
        lines = len(path.read_text().splitlines())
        if lines > 400:
            long.append(f"{name}: {lines} lines")
    assert not long, long


def test_outside_the_simulation_only_the_commands_that_run_it_import_it():
    """No stage, library module or orchestrator of the owner's side imports the simulation,
    at module level or inside a function (break: the report stage reading the rows from
    ``simulation.rows``, or the runner the pipeline's helpers)."""
    importers = {
        name
        for name, path in _modules().items()
        if not _simulation(name) and any(_simulation(m) for m in _imports(path))
    }
    assert importers == RUN_THE_SIMULATION


def test_only_the_corpus_stage_reads_the_unknown_shapes():
    """The record shapes of ``data.shapes: unknown`` are the simulation's secret: a data-free
    module that imported them would let the owner's side prompt with the shapes it must find."""
    readers = {
        name
        for name, path in _modules().items()
        if "dfsu.simulation.shapes" in _imports(path) and name != "dfsu.simulation.shapes"
    }
    assert readers == {"dfsu.simulation.stages.corpus"}


def _reached(roots: tuple[str, ...]) -> dict[str, list[str]]:
    """Every module the roots import, transitively (at module level or inside functions, and
    the packages above each, which Python imports first), with the chain that reaches it."""
    modules = _modules()
    chains = {root: [root] for root in roots}
    todo = list(roots)
    while todo:
        name = todo.pop()
        for imported in sorted(_imports(modules[name])):
            parts = imported.split(".")
            for module in (".".join(parts[: i + 1]) for i in range(len(parts))):
                if module in modules and module not in chains:
                    chains[module] = [*chains[name], module]
                    todo.append(module)
    return chains


def test_the_owners_side_imports_nothing_of_the_simulation():
    """`dfsu forget` runs on the owner's side: the pieces of `dfsu run` it shares (the runner,
    the stage table, the owner's stages) are below the simulation, not in it (break: forget
    importing the pipeline's helpers, or the runner reading the simulation's rows)."""
    reached = _reached(OWNER_SIDE)
    offenders = [
        " -> ".join(chain) for module, chain in sorted(reached.items()) if _simulation(module)
    ]
    assert not offenders, offenders
    # what forget runs is in the walk: the owner's boundary and the stage functions it calls
    ran = {"dfsu.boundary", "dfsu.stages.seal", "dfsu.stages.tagger", "dfsu.stages.inverter"}
    ran |= {"dfsu.stages.synthesis", "dfsu.stages.unlearn"}
    assert ran <= set(reached)


def test_dfsu_forget_on_the_command_line_loads_nothing_of_the_simulation(tmp_path):
    """The command line imports only the group of the command given: `dfsu forget` up to its
    first check loads no simulation module (break: the parser built from every group again,
    whose `run` group imports the pipeline)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from dfsu.cli import main\n"
        f"rc = main(['forget', '--model', {str(tmp_path / 'missing')!r}, '--out', "
        f"{str(tmp_path / 'out')!r}])\n"
        "print(rc, sorted(m for m in sys.modules if m.startswith('dfsu.')))\n"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    rc, _, loaded = got.stdout.strip().partition(" ")
    assert rc == "2" and "missing" in got.stderr, got.stderr  # the one-line error
    assert "dfsu.cli.forget" in loaded and "dfsu.owner.forget" in loaded
    found = [m for m in ast.literal_eval(loaded) if _simulation(m)]
    assert not found, found


def _call_name(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _names_a_run_path(node: ast.AST) -> bool:
    """Whether an expression reads a run directory's layout (``paths.X``, ``RunPaths(..).X``,
    ``owner.paths.X``)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in ("paths", "RunPaths"):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "paths":
            return True
    return False


def test_the_stage_table_alone_names_a_stages_outputs():
    """A stage's outputs are written down once, in ``dfsu.stage_table``: the runner takes no
    outputs, no call passes a list of run paths to a stage, and no function elsewhere lists a
    stage's outputs (breaks: ``stage(name, upstream, [paths.train], fn)``, ``seal_outputs``)."""
    import inspect

    from dfsu.owner.stages import run_stage
    from dfsu.stage_runner import Stages

    for fn in (Stages.__call__, Stages.due, run_stage):
        assert "outputs" not in inspect.signature(fn).parameters, fn
    offenders = []
    for name, path in _modules().items():
        if name == "dfsu.stage_table":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.endswith("_outputs"):
                offenders.append(f"{name}.{node.name}")
            if not isinstance(node, ast.Call):
                continue
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.List | ast.Tuple) and _names_a_run_path(arg):
                    offenders.append(f"{name}:{node.lineno} {_call_name(node)}(...)")
    assert not offenders, offenders


def test_every_dependency_is_pinned():
    """A fresh install resolves the versions the recorded figures were measured with (a range
    let one resolve others and move an unlearned row of the demo by points)."""
    import tomllib

    project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    required = (
        project["project"]["dependencies"] + project["project"]["optional-dependencies"]["dev"]
    )
    loose = [r for r in required if "==" not in r]
    assert not loose, loose
