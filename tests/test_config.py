import pytest
import yaml

from dfsu.config import RunConfig, configs_dir, dump_config, load_config
from dfsu.errors import DfsuError


@pytest.mark.parametrize("path", sorted(configs_dir().glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    cfg = load_config(str(path))
    assert isinstance(cfg, RunConfig)
    # The resolved config round-trips through YAML to the same values.
    assert load_config_from_text(dump_config(cfg), path.parent) == cfg


def load_config_from_text(text, tmp_dir):
    values = yaml.safe_load(text)
    from dfsu.config import _build

    return _build(RunConfig, values, "")


def test_the_three_scenario_configs_ship():
    names = {p.stem for p in configs_dir().glob("*.yaml")}
    assert {"tiny", "small", "paper-pythia410m"} <= names


def test_dotted_overrides_are_typed():
    cfg = load_config("tiny", ["target.epochs=2", "target.lr=1e-3", "data.labels=[IPV4, EMAIL]"])
    assert cfg.target.epochs == 2.0 and isinstance(cfg.target.epochs, float)
    assert cfg.target.lr == 1e-3
    assert cfg.data.labels == ["IPV4", "EMAIL"]


def test_unknown_key_names_the_key():
    with pytest.raises(DfsuError, match=r"unknown key 'target\.epoch'"):
        load_config("tiny", ["target.epoch=2"])
    with pytest.raises(DfsuError, match=r"unknown key 'nonsense'"):
        load_config("tiny", ["nonsense=1"])


def test_bad_values_name_the_key():
    with pytest.raises(DfsuError, match=r"target\.hidden_size: expected int"):
        load_config("tiny", ["target.hidden_size=wide"])
    with pytest.raises(DfsuError, match=r"target\.lr: must be > 0"):
        load_config("tiny", ["target.lr=0"])
    with pytest.raises(DfsuError, match=r"inverter\.positions"):
        load_config("tiny", ["inverter.positions=middle"])
    with pytest.raises(DfsuError, match=r"evaluation\.prefix"):
        load_config("tiny", ["evaluation.prefix=tokens:x"])


def test_missing_config_file_is_an_error(tmp_path):
    with pytest.raises(DfsuError, match="no such file"):
        load_config(str(tmp_path / "nope.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(DfsuError, match="top level must be a mapping"):
        load_config(str(bad))


@pytest.mark.parametrize(
    "override, key",
    [
        ("evaluation.temperature=-1", "evaluation.temperature"),
        ("evaluation.temperature=.inf", "evaluation.temperature"),
        ("evaluation.top_k=-1", "evaluation.top_k"),
        ("unlearning.lora_dropout=2", "unlearning.lora_dropout"),
        ("unlearning.batch_size=0", "unlearning.batch_size"),
        ("unlearning.max_steps=-1", "unlearning.max_steps"),
        ("unlearning.beta=.inf", "unlearning.alpha/beta/retain_weight"),
        ("unlearning.beta=.nan", "unlearning.alpha/beta/retain_weight"),
        ("seed=-1", "seed"),
        ("unlearning.retain_self_search=beam", "unlearning.retain_self_search"),
        ("unlearning.retain_self_tokens=1", "unlearning.retain_self_tokens"),
    ],
)
def test_out_of_range_values_are_refused_with_their_key(override, key):
    with pytest.raises(DfsuError, match=f"config: {key}"):
        load_config("tiny", [override])


def test_every_setting_enters_the_key_of_the_stages_that_read_it():
    from dfsu.stage_runner import _section

    base = load_config("tiny")
    assert _section(base, "corpus")["contact_records"] == 0  # no value stays out (no neutrals)
    assert "keep" in _section(base, "public")
    more = load_config("tiny", ["corpus.contact_records=4"])
    assert _section(more, "corpus")["contact_records"] == 4


def test_a_config_starts_from_its_base(tmp_path):
    from dfsu.config import dump_config, load_config
    from dfsu.errors import DfsuError

    mine = tmp_path / "mine.yaml"
    mine.write_text("base: tiny\nseed: 7\ntarget:\n  epochs: 2\n")
    cfg, tiny = load_config(str(mine)), load_config("tiny")
    assert cfg.seed == 7 and cfg.target.epochs == 2
    assert cfg.target.hidden_size == tiny.target.hidden_size  # the rest of the section kept
    assert cfg.inverter == tiny.inverter
    assert "\nbase:" not in "\n" + dump_config(cfg)
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(DfsuError, match="base configs form a loop"):
        load_config(str(tmp_path / "a.yaml"))
    (tmp_path / "c.yaml").write_text("base: [tiny]\n")
    with pytest.raises(DfsuError, match="base must be a config name"):
        load_config(str(tmp_path / "c.yaml"))


# --------------------------------------------------------------------------- grouped settings

# A value of each moved setting other than its default and tiny's.
MOVED_VALUES = {
    "unlearning.npo_beta": 0.2,
    "unlearning.distill_gamma": 20.0,
    "unlearning.distill_pii_weight": 3.0,
    "unlearning.distill_lr": 0.002,
    "unlearning.distill_unlikelihood": 2.0,
    "unlearning.loop_rounds": 3,
    "unlearning.loop_steps": 7,
    "target.device": "cpu",
    "target.dtype": "bfloat16",
    "target.gradient_checkpointing": "always",
    "target.cpu_bf16": "auto",
    "data.swap_pool_size": 9,
    "synthesis.keep": "keep.txt",
    "leak.keep": "keep.txt",
    "synthesis.templates": "shapes.txt",
    "leak.templates": "shapes.txt",
}


def _get(cfg, key):
    from operator import attrgetter

    return attrgetter(key)(cfg)


def test_every_moved_key_has_a_test_value():
    from dfsu.config import MOVED

    assert set(MOVED_VALUES) == set(MOVED)


def test_grouped_settings_load_from_yaml_and_overrides(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("unlearning:\n  distill:\n    gamma: 30\n  loop:\n    rounds: 2\n")
    cfg = load_config(str(mine), ["unlearning.npo.beta=0.3", "unlearning.distill.lr=1e-3"])
    uc = cfg.unlearning
    assert (uc.distill.gamma, uc.loop.rounds, uc.npo.beta, uc.distill.lr) == (30.0, 2, 0.3, 1e-3)
    assert isinstance(uc.distill.gamma, float)
    assert uc.loop.steps == 60 and uc.distill.pii_weight == 1.0  # the rest of a group kept
    tiny = load_config("tiny").unlearning.distill
    assert (tiny.gamma, tiny.unlikelihood, tiny.lr) == (30.0, 1.0, 1e-3)
    with pytest.raises(DfsuError, match=r"unknown key 'unlearning\.distill\.gama'"):
        load_config("tiny", ["unlearning.distill.gama=1"])
    with pytest.raises(DfsuError, match=r"config: unlearning\.loop\.rounds: .*\[0, 100\]"):
        load_config("tiny", ["unlearning.loop.rounds=101"])


@pytest.mark.parametrize("old", sorted(MOVED_VALUES))
def test_an_old_flat_key_sets_its_new_place(old, tmp_path):
    from dfsu.config import MOVED

    value, new = MOVED_VALUES[old], MOVED[old]
    by_new = load_config("tiny", [f"{new}={value}"])
    assert _get(by_new, new) == value
    assert load_config("tiny", [f"{old}={value}"]) == by_new  # an override
    section, leaf = old.split(".")
    mine = tmp_path / "mine.yaml"
    mine.write_text(f"base: tiny\n{section}:\n  {leaf}: {value}\n")
    assert load_config(str(mine)) == by_new  # a config file
    # The same value under both keys is one setting given twice; different values an error.
    assert load_config("tiny", [f"{old}={value}", f"{new}={value}"]) == by_new
    with pytest.raises(DfsuError, match=f"old key {old}=.* and the new {new}=.*give only {new}"):
        load_config("tiny", [f"{old}={value}", f"{new}=5"])
    import yaml

    both: dict = {section: {leaf: value}}
    *path, new_leaf = new.split(".")
    node = both
    for part in path:
        node = node.setdefault(part, {})
    node[new_leaf] = 5
    mine.write_text(yaml.safe_dump(both))
    with pytest.raises(DfsuError) as info:
        load_config(str(mine))
    assert str(mine) in str(info.value) and old in str(info.value) and new in str(info.value)
    assert len(str(info.value).splitlines()) == 1


def test_an_old_key_overrides_a_files_new_key():
    """The recorded commands of docs/history.md give old keys over tiny's grouped ones."""
    cfg = load_config("tiny", ["unlearning.distill_gamma=10", "unlearning.distill_lr=2e-4"])
    assert (cfg.unlearning.distill.gamma, cfg.unlearning.distill.lr) == (10.0, 2e-4)
    assert cfg.unlearning.distill.unlikelihood == 1.0  # tiny's, untouched
    whole = load_config("tiny", ["unlearning={npo_beta: 0.4}"]).unlearning
    assert whole.npo.beta == 0.4 and whole.lr == 1e-4  # a section given whole: the defaults


def test_an_older_runs_stored_config_loads_and_dumps_the_new_layout(tmp_path):
    from dfsu.config import MOVED

    cfg = load_config("tiny", [f"{k}={v}" for k, v in MOVED_VALUES.items()])
    # The config as an older version stored it in RUN/config.yaml: flat keys.
    values = yaml.safe_load(dump_config(cfg))
    moved_from: list[tuple[dict, str]] = []
    for old, new in MOVED.items():  # two old keys may have moved to one new one
        *new_path, leaf = new.split(".")
        *old_path, old_leaf = old.split(".")
        node, into = values, values
        for part in new_path:
            node = node[part]
        for part in old_path:
            into = into.setdefault(part, {})
        into[old_leaf] = node[leaf]
        moved_from.append((node, leaf))
    for node, leaf in moved_from:
        node.pop(leaf, None)
    assert values.pop("runtime") == {}  # all of it was the target's
    for newer in ("locales", "nli_task"):  # the owner's, newer than the flat layout
        del values["public"][newer]
    unlearning = values["unlearning"]
    added_since = {  # newer than the flat layout
        "loop": {
            "spread_bound",
            "lr",
            "null_space",
            "max_self_ppl_increase",
            "self_samples",
            "max_degenerate",
            "max_garbled",
            "alternatives",
            "guard_prompts",
            "retain_self",
            "retain_self_copies",
            "project_retain",
            "enough",
        }
    }
    for group in ("npo", "distill", "loop"):
        assert set(unlearning.pop(group)) == added_since.get(group, set())
    stored = tmp_path / "config.yaml"
    stored.write_text(yaml.safe_dump(values, sort_keys=False))
    assert load_config(str(stored)) == cfg
    text = dump_config(load_config(str(stored)))
    dumped = yaml.safe_load(text)
    for old in MOVED:  # only the new layout: no old key in its old place
        section, leaf = old.split(".")
        assert leaf not in dumped.get(section, {}), old
    assert "\n  distill:\n    gamma: 20.0\n" in text
    (tmp_path / "new.yaml").write_text(text)
    assert load_config(str(tmp_path / "new.yaml")) == cfg  # round trip


def test_an_unlearning_is_keyed_by_its_methods_groups_alone(tmp_path):
    """An unlearning's key reads the shared settings and its method's groups (and the loop's
    on the loop's data): a new group needs no value that keeps older keys; reading a group it
    does not declare is an error naming the stage."""
    from dfsu.stage_runner import Stages
    from dfsu.stage_table import UNLEARN, Recipe

    def key(overrides: list[str], recipe: Recipe) -> str:
        cfg = load_config("tiny", overrides)
        return Stages(cfg, tmp_path / "k", set())._state(UNLEARN, "x", recipe)[0]

    pscu, npo = Recipe("pscu", "pseudo", "self"), Recipe("npo", "pseudo", "self")
    loop, undo = Recipe("pscu", "loop", "self"), Recipe("undo", "loop", "self")
    for group in ("unlearning.undo.steps=7", "unlearning.reset.budget=0.5"):
        assert key([group], pscu) == key([], pscu) == key([], pscu)
    assert key(["unlearning.npo.beta=0.3"], npo) != key([], npo)
    assert key(["unlearning.npo.beta=0.3"], pscu) == key([], pscu)
    assert key(["unlearning.loop.steps=7"], loop) != key([], loop)
    assert key(["unlearning.loop.steps=7"], pscu) == key([], pscu)
    assert key(["unlearning.undo.steps=7"], undo) != key([], undo)
    assert key(["unlearning.lr=0.5"], pscu) != key([], pscu)  # shared settings count
    seen = load_config("tiny").unlearning.reading(("npo",), "unlearn:x")
    assert seen.npo.beta == 0.1
    with pytest.raises(DfsuError, match="unlearn:x: reads unlearning.undo.steps"):
        _ = seen.undo.steps
    with pytest.raises(DfsuError, match="unlearn:x: reads unlearning.reset.budget"):
        _ = seen.reset.budget  # a lazy group, never read before: unreadable all the same
    reset = Recipe("reset", "loop", "self")
    assert key(["unlearning.reset.budget=0.5"], reset) != key([], reset)


def test_the_lazy_groups_load_when_a_config_sets_or_reads_them_and_not_before(capsys):
    """edit, revs and reset's settings (``config.unlearn.LAZY_GROUPS``) are imported the first
    time a config sets or reads them, so `dfsu forget`'s default loads none (break: import
    ResetConfig at the top of config/unlearn.py). RUN/config.yaml and `dfsu config` show them."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from dfsu.config import load_config\n"
        "seen = lambda: 'dfsu.config.reset' in sys.modules\n"
        "cfg = load_config('tiny')\n"
        "print(seen(), cfg.unlearning.reset.budget, seen())\n"
        "print(load_config('tiny', ['unlearning.reset.budget=0.5']).unlearning.reset.budget)\n"
    )
    lines = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert lines[:2] == ["False 0.02 True", "0.5"]
    cfg = load_config("tiny")
    assert "reset" not in yaml.safe_load(dump_config(cfg))["unlearning"]  # forget's OUT
    cfg.unlearning.with_every_group()
    every = yaml.safe_load(dump_config(cfg))["unlearning"]
    assert every["reset"]["budget"] == 0.02 and every["revs"] and every["edit"]
    from dfsu.cli import main

    assert main(["config", "--config", "tiny"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)["unlearning"]
    assert shown["reset"] == every["reset"] and shown["revs"] == every["revs"]


def test_a_sweep_grid_may_use_an_old_key():
    from dfsu.simulation.sweep import _override, parse_axis, points

    grid = points([parse_axis("unlearning.distill_gamma=10,20")])
    cfgs = [load_config("tiny", [_override(k, v) for k, v in p.items()]) for p in grid]
    assert [c.unlearning.distill.gamma for c in cfgs] == [10.0, 20.0]


def test_the_loop_rows_follow_their_own_retain_settings_where_set():
    cfg = load_config("tiny", ["unlearning.retain_self=7", "unlearning.loop.retain_self_copies=3"])
    loop = cfg.unlearning.for_loop()
    assert (loop.retain_self, loop.retain_self_copies) == (7, 3)  # null: unlearning's
    assert loop.project_retain is False  # null: unlearning's, off
    loop_on = load_config("tiny", ["unlearning.loop.project_retain=true"]).unlearning
    assert loop_on.for_loop().project_retain is True and loop_on.project_retain is False
    off = load_config(
        "tiny", ["unlearning.project_retain=true", "unlearning.loop.project_retain=false"]
    )
    assert off.unlearning.for_loop().project_retain is False
    with pytest.raises(DfsuError, match="unlearning.loop.project_retain: needs"):
        load_config("tiny", ["unlearning.retain_weight=0", "unlearning.loop.project_retain=true"])
