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


def test_a_setting_at_its_neutral_value_stays_out_of_stage_keys():
    from dfsu.stage_runner import _section

    base = load_config("tiny")
    assert "contact_records" not in _section(base, "corpus")  # neutral: 0
    assert "keep" not in _section(base, "leak")  # neutral: None
    more = load_config("tiny", ["corpus.contact_records=4"])
    assert _section(more, "corpus")["contact_records"] == 4
    assert "num_documents" in _section(base, "corpus")  # ordinary settings always count


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
