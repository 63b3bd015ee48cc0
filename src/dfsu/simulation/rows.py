"""The rows of `dfsu run`: which rows there are, which model each one evaluates, and the
recipe (method, data, pseudo source) of each unlearned row."""

from __future__ import annotations

from dfsu.config import SOURCES, RunConfig
from dfsu.stage_table import TRAINED as TRAINED  # rows whose model is no unlearning
from dfsu.stage_table import Recipe
from dfsu.unlearning.methods import METHODS

# The demo shows the paper's method between the original and the oracle, in five minutes on
# 2 CPU cores; dfsu-loop (`dfsu forget`'s default) is `dfsu demo --rows original,oracle,dfsu,
# dfsu-loop` (about 80 s more); the baselines (ga, gen_only, npo, graddiff), the retrain and the
# distill rows are `dfsu run tiny` (or `dfsu demo --full`).
DEMO_ROWS = ["original", "oracle", "dfsu"]
# row -> (method, data) for unlearned rows; "dfsu-<source>" rows use that pseudo source.
# dfsu-loop: PSCU rounds on what the leak estimate extracts from the model itself.
UNLEARNED = (
    {"oracle": ("pscu", "oracle")}
    | {m.row: (m.name, "pseudo") for m in METHODS.values() if m.adapters}
    | {"dfsu-loop": ("pscu", "loop"), "distill-loop": ("distill", "loop")}
    # rmu: representation misdirection, data-free on what the loop confirms, and its twin
    | {"rmu-loop": ("rmu", "loop"), "rmu-oracle": ("rmu", "oracle")}
    # a method that trains no adapter (edit, revs, undo, reset, a plug-in's): its row on what
    # the leak estimate confirms, and its oracle twin on the true values
    | {
        row: (m.name, data)
        for m in METHODS.values()
        if not m.adapters
        for row, data in ((m.row, "loop"), (f"{m.row}-oracle", "oracle"))
        if data in m.data
    }
)
SOURCE_ROWS = [f"dfsu-{s}" for s in SOURCES]  # pscu on the pseudo-PII of another source
# retrain: the target's recipe without the private records, the gold standard every row is
# read against (``vs_retrain`` in results.json).
KNOWN_ROWS = ["original", "retrain", *UNLEARNED, *SOURCE_ROWS]


def default_rows(cfg: RunConfig) -> list[str]:
    """Every known row once: ``dfsu-<source>`` of the configured source is ``dfsu`` itself."""
    return [r for r in KNOWN_ROWS if r != f"dfsu-{cfg.synthesis.source}"]


def row_recipe(cfg: RunConfig, row: str) -> Recipe:
    """The recipe (method, data, pseudo source) of an unlearned row."""
    if row in SOURCE_ROWS:
        return Recipe("pscu", "pseudo", row.split("-", 1)[1])
    method, data = UNLEARNED[row]
    return Recipe(method, data, cfg.synthesis.source)
