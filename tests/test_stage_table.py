"""The stage table: the upstream lists that make the keys of the run directories on disk, the
stages each one builds on as declared, the names and outputs of each stage."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from conftest import MICRO

from dfsu.config import load_config
from dfsu.stage_table import (
    ANNOTATE,
    CORPUS,
    EVAL_FORMAT,
    EVALUATE,
    EVALUATE_ATTACKS,
    INVERTER,
    RETRAIN,
    SEAL,
    SEAL_PUBLIC,
    SYNTHESIZE,
    TABLE,
    TAGGER,
    TARGET,
    UNLEARN,
    Recipe,
    upstream_of,
)

KEYS = {
    name: f"K-{name}"
    for name in (
        "corpus",
        "target",
        "retrain",
        "seal",
        "inverter",
        "tagger",
        "synthesize:self",
        "annotate:self",
        "unlearn:dfsu",
        "unlearn:dfsu-loop",
        "unlearn:oracle",
    )
}
PSEUDO, LOOP = Recipe("pscu", "pseudo", "self"), Recipe("pscu", "loop", "self")


@pytest.mark.parametrize(
    ("stage", "arg", "recipe", "expected"),
    [
        (CORPUS, "", None, []),
        (TARGET, "", None, ["K-corpus"]),
        (RETRAIN, "", None, ["K-corpus"]),
        (SEAL, "", None, ["K-target"]),
        (SEAL_PUBLIC, "", None, ["K-target"]),
        (INVERTER, "", None, ["K-seal"]),
        (SYNTHESIZE, "inversion", None, ["K-inverter", "inversion"]),
        (SYNTHESIZE, "self", None, ["K-seal", "self"]),
        (ANNOTATE, "self", None, ["K-synthesize:self", "K-tagger", None]),
        (UNLEARN, "dfsu", PSEUDO, ["K-annotate:self", "K-seal", "pscu", "pseudo", "K-tagger"]),
        (UNLEARN, "dfsu-loop", LOOP, ["K-target", "K-seal", "pscu", "loop", "K-tagger"]),
        # the undo rows taught by the owner's model (the default) build on no unlearning
        (
            UNLEARN,
            "undo",
            Recipe("undo", "loop", "self"),
            ["K-target", "K-seal", "undo", "loop", "K-tagger"],
        ),
        (EVALUATE, "original", None, ["K-target", EVAL_FORMAT, "K-tagger", "K-seal"]),
        (EVALUATE, "retrain", None, ["K-retrain", EVAL_FORMAT, "K-tagger", "K-seal"]),
        (EVALUATE, "dfsu", None, ["K-unlearn:dfsu", EVAL_FORMAT, "K-tagger", "K-seal"]),
    ],
)
def test_the_upstream_lists_are_those_of_the_run_directories_on_disk(stage, arg, recipe, expected):
    # Frozen: the lists (hence the keys) that `dfsu run` and `dfsu forget` recorded before the
    # table existed; a change here makes every existing run directory recompute.
    cfg = load_config("tiny", MICRO)
    assert upstream_of(cfg, stage, arg, KEYS, recipe) == expected


def test_an_undo_row_taught_by_an_unlearning_builds_on_it():
    # unlearning.undo.teacher unlearned: the keys of the run directories made before the
    # owner's model taught (a change in the teacher redoes the copy)
    cfg = load_config("tiny", [*MICRO, "unlearning.undo.teacher=unlearned"])
    loop, oracle = Recipe("undo", "loop", "self"), Recipe("undo", "oracle", "self")
    expected = ["K-target", "K-seal", "undo", "loop", "K-tagger", "K-unlearn:dfsu-loop"]
    assert upstream_of(cfg, UNLEARN, "undo", KEYS, loop) == expected
    expected = ["K-target", "K-seal", "undo", "oracle", "K-tagger", "K-unlearn:oracle"]
    assert upstream_of(cfg, UNLEARN, "undo-oracle", KEYS, oracle) == expected


def test_the_upstream_lists_without_a_tagger_and_with_the_owners_attacks():
    from dfsu import __version__
    from dfsu.pii.tagger import FORMAT

    cfg = load_config("tiny", [*MICRO, "leak.attacks=[relearn:3,quant:4]"])
    no_tagger = {k: v for k, v in KEYS.items() if k != "tagger"}
    assert upstream_of(cfg, ANNOTATE, "self", no_tagger) == ["K-synthesize:self", "", None]
    assert upstream_of(cfg, UNLEARN, "x", no_tagger, LOOP)[-1] == ""
    assert upstream_of(cfg, TAGGER, "", {}) == [FORMAT, __version__, []]
    attacks = upstream_of(cfg, EVALUATE_ATTACKS, "dfsu", KEYS)
    assert attacks == [*upstream_of(cfg, EVALUATE, "dfsu", KEYS), ["relearn:3", "quant:4"]]
    with pytest.raises(Exception, match="no recipe"):
        upstream_of(cfg, UNLEARN, "dfsu", KEYS)


class _Watched(Mapping):
    """Stage keys that remember which were looked up."""

    def __init__(self, keys):
        self.keys, self.read = keys, set()

    def __getitem__(self, name):
        self.read.add(name)
        return self.keys[name]

    def __iter__(self):
        return iter(self.keys)

    def __len__(self):
        return len(self.keys)

    def get(self, name, default=None):
        self.read.add(name)
        return self.keys.get(name, default)


@pytest.mark.parametrize("stage", TABLE, ids=[f"{s.kind}:{s.named}" for s in TABLE])
def test_a_stage_reads_the_keys_of_the_stages_it_builds_on_and_no_other(stage):
    cfg = load_config("tiny", MICRO)
    read = set()
    for arg in ("original", "retrain", "dfsu", "inversion", "self"):
        for recipe in (PSEUDO, LOOP, Recipe("pscu", "oracle", "self")):
            keys = _Watched(KEYS)
            upstream_of(cfg, stage, arg, keys, recipe)
            read |= {name.split(":")[0] for name in keys.read}
    assert read == set(stage.builds_on), (stage.named, read)


def test_names_outputs_and_the_boundary(tmp_path):
    from dfsu.rundir import RunPaths
    from dfsu.stage_table import sealed

    paths = RunPaths(tmp_path)
    assert SYNTHESIZE.name("self") == "synthesize:self" and CORPUS.name() == "corpus"
    assert EVALUATE_ATTACKS.name("dfsu-loop") == "evaluate:dfsu-loop:attacks"
    assert UNLEARN.outputs(paths, "x") == [
        tmp_path / "unlearned" / "x" / "merged" / "model.safetensors"
    ]
    assert EVALUATE_ATTACKS.outputs(paths, "x") == [tmp_path / "eval" / "x.attacks.json"]
    for stage in TABLE:  # every output lies in the run directory
        assert all(tmp_path in p.parents for p in stage.outputs(paths, "self"))
    assert sealed(SYNTHESIZE) and sealed(UNLEARN, PSEUDO) and sealed(UNLEARN, LOOP)
    assert not sealed(UNLEARN, Recipe("pscu", "oracle", "self"))
    assert not any(sealed(s) for s in (CORPUS, TARGET, RETRAIN, EVALUATE, EVALUATE_ATTACKS))


def test_the_owners_stages_and_config_hold_nothing_of_the_simulated_world():
    """`dfsu forget`'s stages declare no section of the simulated world, so no key of theirs
    moves with it and the owner's config needs none (break: the inverter reading the target's
    section again, or owner.yaml setting one)."""
    import re
    from pathlib import Path

    from dfsu.config import configs_dir, load_yaml
    from dfsu.stage_table import OWNER_STAGES

    world = {"data", "corpus", "target"}
    assert {s.kind for s in OWNER_STAGES} >= {"seal", "tagger", "inverter", "unlearn"}
    assert not [(s.named, world & set(s.reads)) for s in OWNER_STAGES if world & set(s.reads)]
    owner = load_yaml((configs_dir() / "owner.yaml").read_text(), "owner.yaml")
    assert not world & set(owner)
    owner_side = Path(__file__).parents[1] / "src" / "dfsu" / "owner"
    for path in [*owner_side.glob("*.py"), owner_side.parent / "boundary.py"]:
        assert not re.findall(r"\bcfg\.(data|corpus|target)\b", path.read_text()), path.name
