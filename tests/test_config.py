"""distalign.config: YAML loading, dotted overrides, validation errors that name the key, path resolution."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from distalign.config import ConfigError, ExperimentConfig, load_config, load_dataclass, resolve_tracking_uri
from distalign.studies import load_study

CONFIG_DIR = Path(__file__).resolve().parents[1] / "jobs" / "configs"
QUICKSTART = CONFIG_DIR / "quickstart.yaml"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DISTALIGN_HOME", str(home))
    for key in ("MLFLOW_TRACKING_URI", "DISTALIGN_STORAGE", "DISTALIGN_STORAGE_ENDPOINT"):
        monkeypatch.delenv(key, raising=False)
    return home.resolve()


@pytest.fixture
def data_files(tmp_path):
    """A constraint parquet, a dictionary and a corpus that exist."""
    d = tmp_path / "inputs"
    d.mkdir()
    constraints = d / "c.parquet"
    pq.write_table(
        pa.table({"word1": ["a"], "lang1": ["en"], "word2": ["b"], "lang2": ["de"], "synset_id": ["s"]}), constraints
    )
    dictionary = d / "en-de.tsv"
    dictionary.write_text("dog\tHund\n")
    corpus = d / "en.txt"
    corpus.write_text("a sentence\n")
    return {"constraints": constraints, "dictionary": dictionary, "corpus": corpus, "dir": d}


def files_overrides(constraints="", corpus="", dictionary=""):
    out = ["data.source=files"]
    if constraints:
        out.append(f"data.constraints=[{constraints}]")
    if corpus:
        out.append(f"data.corpora=[{{path: {corpus}, lang: en}}]")
    if dictionary:
        out.append(f"data.dictionaries=[{{path: {dictionary}, lang1: en, lang2: de}}]")
    return out


# ------------------------------------------------------------------------------------ files
def test_quickstart_loads_with_its_values():
    config = load_config(QUICKSTART)
    assert isinstance(config, ExperimentConfig)
    raw = yaml.safe_load(QUICKSTART.read_text())
    assert config.run.name == raw["run"]["name"] == "quickstart"
    assert config.train.lr == pytest.approx(float(raw["train"]["lr"]))
    assert isinstance(config.train.lr, float)
    assert config.train.max_steps == raw["train"]["max_steps"]
    assert config.train.num_workers == raw["train"]["num_workers"]
    assert config.model.name_or_path == "tiny"
    assert config.model.tiny.hidden_size == raw["model"]["tiny"]["hidden_size"]
    assert config.data.source == "synthetic"
    assert config.data.synthetic.languages == raw["data"]["synthetic"]["languages"]
    assert config.objectives.weights() == {"mlm": 1.0, "lexical": 1.0}
    # keys not in the file keep their dataclass defaults
    assert config.model.tiny.max_length == 64


def stand_in_data_files(raw: dict, root: Path) -> None:
    """Empty files where a published-setting config names the data its user brings (corpora, dictionaries)."""
    data = raw.get("data", {})
    paths = list(data.get("constraints", [])) + [
        source["path"]
        for key in ("dictionaries", "eval_dictionaries", "corpora", "validation_corpora", "static_vectors")
        for source in data.get(key, [])
    ]
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).touch()
    if vocab_dir := raw.get("eval", {}).get("vocab_dir"):
        (root / vocab_dir).mkdir(parents=True, exist_ok=True)


# bench_synthetic.yaml gets its data paths from the bench; tests/tools/bench loads it with them
@pytest.mark.parametrize(
    "path", sorted(set(CONFIG_DIR.glob("*.yaml")) - {CONFIG_DIR / "bench_synthetic.yaml"}), ids=lambda p: p.name
)
def test_every_shipped_config_loads(path, tmp_path, monkeypatch):
    raw = yaml.safe_load(path.read_text())
    monkeypatch.chdir(tmp_path)  # relative data paths resolve against the working directory first
    stand_in_data_files(raw, tmp_path)
    if "study" in raw:
        study, trials = load_study(path)
        assert trials and all(isinstance(c, ExperimentConfig) for c in trials.values())
    else:
        assert isinstance(load_config(path), ExperimentConfig)


# objective -> (the published setting, its tiny variant that runs here)
OBJECTIVE_CONFIGS = {
    "lexical": ("babelbert.yaml", "quickstart.yaml"),
    # one published config per variant the paper ran; one tiny run covers both (sense level + adapters)
    "lexical (adapters)": ("babelbert_adapters.yaml", "babelbert_sense_adapters_tiny.yaml"),
    "lexical (sense level)": ("babelbert_gloss.yaml", "babelbert_sense_adapters_tiny.yaml"),
    "align": ("align_mlm.yaml", "align_mlm_tiny.yaml"),
    "dict_mlm": ("dict_mlm.yaml", "dict_mlm_tiny.yaml"),
    "static": ("static_align.yaml", "static_align_tiny.yaml"),
    "sense_aware": ("sense_aware.yaml", "sense_aware_tiny.yaml"),
}


@pytest.mark.parametrize("objective", sorted(OBJECTIVE_CONFIGS))
def test_every_objective_has_a_published_and_a_tiny_config(objective, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    published, tiny = (CONFIG_DIR / name for name in OBJECTIVE_CONFIGS[objective])
    stand_in_data_files(yaml.safe_load(published.read_text()), tmp_path)
    name = objective.split()[0]
    for path in (published, tiny):
        config = load_config(path)
        assert name in config.objectives.active(), path.name
        assert config.model.adapters.enabled or "adapters" not in objective
        assert config.objectives.lexical.sense_level or "sense level" not in objective
    assert load_config(tiny).model.name_or_path == "tiny" and load_config(tiny).data.source == "synthetic"
    assert load_config(published).train.use_gpu  # published settings are cluster runs


def test_published_settings_are_the_papers():
    def raw(name):
        return yaml.safe_load((CONFIG_DIR / name).read_text())

    # BabelBERT §4 and Table 4 (mBERT): lr / batch per variant, 15 epochs, quarter-epoch validation
    for name, lr, batch in (
        ("babelbert.yaml", 1e-6, 64),
        ("babelbert_adapters.yaml", 5e-6, 32),
        ("babelbert_gloss.yaml", 1e-6, 64),
    ):
        babel = raw(name)
        assert babel["objectives"]["lexical"]["temperature"] == 0.07, name
        assert (babel["train"]["lr"], babel["train"]["num_workers"] * babel["train"]["constraint_batch_size"]) == (
            lr,
            batch,
        ), name
        assert babel["train"]["epochs"] == 15 and babel["train"]["lr_schedule"] == "constant", name
        assert babel["eval"]["every_epochs"] == 0.25 and babel["eval"]["bli_ranking"] == "per_pair", name
        assert babel["data"]["sampling_alpha"] == 0.5, name
    assert raw("babelbert_adapters.yaml")["model"]["adapters"] == {
        "enabled": True,
        "reduction_factor": 16,
        "placement": "pfeiffer",
    }
    assert raw("babelbert_gloss.yaml")["objectives"]["lexical"]["sense_level"] is True
    # ALIGN-MLM (and its DICT-MLM re-run): a dictionary of 25% of the vocabulary by default, sized by the bench
    # that writes it (tests/synthetic_languages/test_synthetic_bench.py), and used whole
    from distalign.synthetic_languages.benchmark import BenchSpec

    assert BenchSpec().dictionary_share == 0.25
    assert all(
        "dictionary_fraction" not in raw(name)["data"] for name in ("align_mlm.yaml", "dict_mlm_align_rerun.yaml")
    )
    assert raw("sense_aware.yaml")["objectives"]["sense_aware"]["prune_beta"] == 0.0  # pruning: SaELMo only (§4)
    align = raw("align_mlm.yaml")
    assert align["objectives"]["align"]["weight"] == 10.0 and align["train"]["max_steps"] == 500000
    assert align["train"]["num_workers"] * align["train"]["corpus_batch_size"] == 128
    # DICT-MLM §3.1: mBERT's shape from scratch, LAMB lr 0.0016, 8,192 sequences a step, 500K steps
    dict_mlm = raw("dict_mlm.yaml")
    assert dict_mlm["objectives"]["dict_mlm"]["synonym_label_percent"] == 50  # DICT-MLM-50
    assert {k: dict_mlm["model"]["tiny"][k] for k in ("hidden_size", "num_layers", "num_heads")} == {
        "hidden_size": 768,
        "num_layers": 12,
        "num_heads": 12,
    }
    t = dict_mlm["train"]
    assert (t["optimizer"], t["lr"], t["max_steps"]) == ("lamb", 0.0016, 500000)
    assert t["num_workers"] * t["corpus_batch_size"] * t["grad_accum_steps"] == 8192
    rerun = raw("dict_mlm_align_rerun.yaml")  # ALIGN-MLM's re-run: AdamW 1e-4, its 8-layer model, App. G.4's variant
    assert "optimizer" not in rerun["train"] and rerun["train"]["lr"] == 1e-4
    objective = rerun["objectives"]["dict_mlm"]
    assert (objective["mask_words"], objective["conditioned_head"], objective["synonym_label_percent"]) == (
        "all",
        False,
        50,
    )
    sense_config = raw("sense_aware.yaml")  # Bi-SaELMo's cross-lingual S and steps (App. D.2), BERT's d' (D.1)
    sense = sense_config["objectives"]["sense_aware"]
    assert (sense["num_senses"], sense["proj_dim"], sense["alpha"], sense["warmup_steps"]) == (3, 14, 0.01, 20000)
    assert sense_config["train"]["max_steps"] == 600000
    static = raw("static_align.yaml")
    assert static["objectives"]["static"] == {"weight": 1.0, "loss": "dcca", "dcca_k": 10}
    assert static["train"]["max_steps"] == 7500 and static["model"]["name_or_path"] == "xlm-roberta-base"
    assert static["eval"]["select_by"] == "mlm_loss" and static["data"]["validation_corpora"]  # App. C's selection
    # BERT-style instances: sentences packed up to the sequence length (ALIGN-MLM G.3; run_mlm's group_texts)
    for name in (
        "align_mlm.yaml",
        "dict_mlm.yaml",
        "dict_mlm_align_rerun.yaml",
        "sense_aware.yaml",
        "static_align.yaml",
    ):
        assert raw(name)["data"]["pack_sequences"] is True, name
    # the authors' scripts: 4 sequences and 64 words per micro-batch, 16 accumulated (64 and 1,024 a step)
    t = static["train"]
    assert (t["corpus_batch_size"], t["static_batch_size"], t["grad_accum_steps"]) == (4, 64, 16)


def test_quickstart_study_builds_the_grid():
    study, trials = load_study(CONFIG_DIR.parents[1] / "tuning" / "quickstart.yaml")
    assert study.study == "quickstart-tune"
    assert len(trials) == 4
    names = list(trials)
    assert len(set(names)) == 4
    assert all(trials[n].run.name == n for n in names)
    points = {(c.train.lr, c.data.max_constraints) for c in trials.values()}
    assert points == {(1e-3, 400), (1e-3, 1200), (3e-4, 400), (3e-4, 1200)}
    for config in trials.values():  # study-wide overrides applied to every trial
        assert config.train.max_steps == 60
        assert config.train.checkpoint_every == 30
        assert config.eval.every == 30
        assert isinstance(config.train.lr, float)


# ------------------------------------------------------------------------------------ errors
def test_unknown_nested_key_is_named():
    with pytest.raises(ConfigError, match=r"train\.lrr"):
        load_config(QUICKSTART, ["train.lrr=1"])
    with pytest.raises(ConfigError, match=r"model\.tiny\.hiden_size"):
        load_config(QUICKSTART, ["model.tiny.hiden_size=8"])
    with pytest.raises(ConfigError, match=r"'bogus'"):
        load_config(QUICKSTART, ["bogus=1"])


def test_unknown_key_in_file_is_named(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  lr: 0.001\n  nope: 3\n")
    with pytest.raises(ConfigError, match=r"train\.nope"):
        load_config(path)


@pytest.mark.parametrize(
    "override,key",
    [
        ("train.max_steps=abc", "train.max_steps"),
        ("train.max_steps=1.5", "train.max_steps"),
        ("train.use_gpu=3", "train.use_gpu"),
        ("train.lr=fast", "train.lr"),
        ("train.lr=true", "train.lr"),
        ("run.name=7", "run.name"),
        ("data.synthetic.languages=xa", "data.synthetic.languages"),
        ("model.tiny=5", "model.tiny"),
    ],
)
def test_wrong_type_names_the_key(override, key):
    with pytest.raises(ConfigError) as err:
        load_config(QUICKSTART, [override])
    assert key in str(err.value)


def test_literal_violation():
    with pytest.raises(ConfigError) as err:
        load_config(QUICKSTART, ["train.engine=horovod"])
    assert "train.engine" in str(err.value) and "horovod" in str(err.value)
    with pytest.raises(ConfigError, match=r"train\.precision"):
        load_config(QUICKSTART, ["train.precision=fp16"])


def test_zero_stage_needs_deepspeed():
    with pytest.raises(ConfigError) as err:
        load_config(QUICKSTART, ["train.zero_stage=2"])
    assert "train.zero_stage" in str(err.value) and "deepspeed" in str(err.value)
    config = load_config(QUICKSTART, ["train.zero_stage=2", "train.engine=deepspeed"])
    assert config.train.zero_stage == 2 and config.train.engine == "deepspeed"
    with pytest.raises(ConfigError, match=r"train\.zero_stage"):
        load_config(QUICKSTART, ["train.zero_stage=4", "train.engine=deepspeed"])


def test_zero_with_fewer_workers_allowed_is_refused():
    """DeepSpeed loads ZeRO's optimizer shards only on the world size that wrote them: a ZeRO run that went on with
    fewer workers after a lost node would fail at every restart (issue 47), so it is refused before it starts."""
    zero = ["train.engine=deepspeed", "train.zero_stage=2", "train.num_workers=4"]
    with pytest.raises(ConfigError, match=r"^train\.min_workers: with train\.zero_stage=2 .*train\.num_workers=4"):
        load_config(QUICKSTART, [*zero, "train.min_workers=2"])
    for allowed in (zero, [*zero, "train.min_workers=4"], ["train.engine=deepspeed", "train.min_workers=1"]):
        load_config(QUICKSTART, allowed)  # a fixed world size, or no ZeRO partitions


def test_value_checks_name_the_key():
    with pytest.raises(ConfigError, match=r"objectives\.mlm\.mask_prob"):
        load_config(QUICKSTART, ["objectives.mlm.mask_prob=1.5"])
    with pytest.raises(ConfigError, match=r"train\.lr"):
        load_config(QUICKSTART, ["train.lr=0"])
    with pytest.raises(ConfigError, match=r"^objectives"):
        load_config(QUICKSTART, ["objectives.mlm.weight=0", "objectives.lexical.weight=0"])
    with pytest.raises(ConfigError, match=r"data\.synthetic\.languages"):
        load_config(QUICKSTART, ["data.synthetic.languages=[xa, xa]"])


def test_files_source_with_existing_files_loads(data_files):
    config = load_config(
        QUICKSTART, files_overrides(data_files["constraints"], data_files["corpus"], data_files["dictionary"])
    )
    assert config.data.constraints == [str(data_files["constraints"])]
    assert config.data.corpora[0].path == str(data_files["corpus"]) and config.data.corpora[0].lang == "en"
    assert config.data.dictionaries[0].lang2 == "de"


def test_missing_constraint_file_names_key_and_path(tmp_path, data_files):
    missing = tmp_path / "nowhere" / "missing.parquet"
    with pytest.raises(ConfigError) as err:
        load_config(QUICKSTART, files_overrides(missing, data_files["corpus"]))
    assert "data.constraints[0]" in str(err.value) and str(missing) in str(err.value)


def test_missing_dictionary_names_key_and_path(tmp_path, data_files):
    missing = tmp_path / "missing.tsv"
    with pytest.raises(ConfigError) as err:
        load_config(QUICKSTART, files_overrides(data_files["constraints"], data_files["corpus"], missing))
    assert "data.dictionaries[0].path" in str(err.value) and str(missing) in str(err.value)


def test_missing_corpus_names_key_and_path(tmp_path, data_files):
    missing = tmp_path / "missing.txt"
    with pytest.raises(ConfigError) as err:
        load_config(QUICKSTART, files_overrides(data_files["constraints"], missing))
    assert "data.corpora[0].path" in str(err.value) and str(missing) in str(err.value)


def test_files_source_needs_data_for_active_objectives(data_files):
    with pytest.raises(ConfigError, match=r"data\.corpora"):
        load_config(QUICKSTART, files_overrides(data_files["constraints"]))
    with pytest.raises(ConfigError, match=r"data\.constraints"):
        load_config(QUICKSTART, files_overrides(corpus=data_files["corpus"]))
    # with the MLM objective off, constraints alone are enough
    config = load_config(QUICKSTART, files_overrides(data_files["constraints"]) + ["objectives.mlm.weight=0"])
    assert config.objectives.weights() == {"lexical": 1.0}


def test_relative_data_path_resolves_next_to_the_config(tmp_path, data_files, monkeypatch):
    config_path = data_files["dir"] / "exp.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "data": {
                    "source": "files",
                    "constraints": ["c.parquet"],
                    "corpora": [{"path": "en.txt", "lang": "en"}],
                },
            }
        )
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(config_path)
    assert config.data.constraints == [str(data_files["constraints"].resolve())]
    assert config.data.corpora[0].path == str(data_files["corpus"].resolve())


def test_not_yaml_or_not_a_mapping_names_the_file(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("train: [1, 2\n  lr: {\n")
    with pytest.raises(ConfigError) as err:
        load_config(broken)
    assert str(broken) in str(err.value)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(ConfigError) as err:
        load_config(listing)
    assert str(listing) in str(err.value)
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "absent.yaml")


def test_malformed_override():
    with pytest.raises(ConfigError, match="train.lr"):
        load_config(QUICKSTART, ["train.lr"])


# ------------------------------------------------------------------------------------ overrides
def test_overrides_parse_yaml_values():
    config = load_config(
        QUICKSTART,
        [
            "train.lr=1e-4",
            "train.weight_decay=0",
            "train.max_steps=7",
            "train.use_gpu=true",
            "data.synthetic.languages=[xa, xb, xc, xd]",
            "run.name=my-run",
        ],
    )
    assert isinstance(config.train.lr, float) and config.train.lr == pytest.approx(1e-4)
    assert isinstance(config.train.weight_decay, float) and config.train.weight_decay == 0.0
    assert config.train.max_steps == 7
    assert config.train.use_gpu is True
    assert config.data.synthetic.languages == ["xa", "xb", "xc", "xd"]
    assert config.run.name == "my-run"
    # an override wins over the file's value; the file's other values stay
    assert config.train.warmup_steps == 20


def test_scientific_notation_in_a_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  lr: 3e-4\n  weight_decay: 1E-2\n")
    config = load_config(path)
    assert config.train.lr == pytest.approx(3e-4) and config.train.weight_decay == pytest.approx(1e-2)


def test_override_creates_missing_sections():
    config = load_config(None, ["objectives.lexical.temperature=0.5"])
    assert config.objectives.lexical.temperature == 0.5
    assert config.objectives.mlm.weight == 1.0  # untouched defaults


def test_flat_gives_dotted_keys():
    config = load_config(QUICKSTART, ["train.lr=2e-3"])
    flat = config.flat()
    assert flat["train.lr"] == pytest.approx(2e-3)
    assert flat["model.tiny.hidden_size"] == config.model.tiny.hidden_size
    assert flat["objectives.mlm.mask_prob"] == 0.15
    assert flat["run.name"] == "quickstart"
    assert flat["data.synthetic.languages"] == ["xa", "xb", "xc"]
    assert not any(isinstance(v, dict) for v in flat.values())
    assert "train" not in flat and "model.tiny" not in flat


# ------------------------------------------------------------------------------------ paths
def test_relative_storage_resolves_under_home(isolated_home):
    config = load_config(QUICKSTART)
    assert config.storage.path == str(isolated_home / "runs")
    assert config.data.output_dir == str(isolated_home / "runs" / "quickstart" / "data")
    assert config.data.cache_dir == str(isolated_home / "runs" / "cache")  # shared by every run of the storage
    assert config.tracking.uri == f"sqlite:///{isolated_home / 'mlflow.db'}"
    assert not config.storage_is_remote


def test_absolute_and_remote_storage(tmp_path, isolated_home):
    absolute = tmp_path / "abs-store"
    config = load_config(QUICKSTART, [f"storage.path={absolute}", "run.name=r1"])
    assert config.storage.path == str(absolute)
    assert config.data.output_dir == str(absolute / "r1" / "data")
    remote = load_config(QUICKSTART, ["storage.path=s3://bucket/prefix", "run.name=r2"])
    assert remote.storage.path == "s3://bucket/prefix" and remote.storage_is_remote
    assert remote.data.output_dir == str(isolated_home / "runs" / "r2" / "data")
    assert remote.data.cache_dir == str(isolated_home / "cache")  # on the driver: runs stage what they use
    assert load_config(QUICKSTART, [f"data.cache_dir={tmp_path}/c"]).data.cache_dir == str(tmp_path / "c")


def test_tracking_uri_from_environment_or_config(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    assert load_config(QUICKSTART).tracking.uri == "http://mlflow.example:5000"
    explicit = load_config(QUICKSTART, ["tracking.uri=sqlite:////data/x.db"])
    assert explicit.tracking.uri == "sqlite:////data/x.db"


def test_storage_from_the_clusters_environment_unless_the_config_names_one(monkeypatch, isolated_home):
    assert load_config(QUICKSTART).storage.path == str(isolated_home / "runs")  # neither: runs/ under the home
    monkeypatch.setenv("DISTALIGN_STORAGE", "s3://team/runs")
    monkeypatch.setenv("DISTALIGN_STORAGE_ENDPOINT", "http://minio:9000")
    config = load_config(QUICKSTART)
    assert (config.storage.path, config.storage.endpoint_url) == ("s3://team/runs", "http://minio:9000")
    explicit = load_config(QUICKSTART, ["storage.path=s3://mine/runs", "storage.endpoint_url=http://other:9000"])
    assert (explicit.storage.path, explicit.storage.endpoint_url) == ("s3://mine/runs", "http://other:9000")


# ------------------------------------------------------------------------------------ the generic loader
@dataclass
class _Inner:
    pair: tuple[str, str] = ("a", "b")
    layer: int | None = None


@dataclass
class _Section:
    names: tuple[str, ...] = ("x",)
    table: dict[str, list[Any]] = field(default_factory=dict)
    inner: _Inner = field(default_factory=_Inner)
    seen: list[str] = field(default_factory=list, init=False)  # state, not configuration


def test_load_dataclass_reads_any_section_with_the_same_checks(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("names: [p, q]\ntable: {train.lr: [1, two]}\ninner: {pair: [c, d]}\n")
    section = load_dataclass(_Section, path, ["inner.layer=-1", "table.data.seed=[3]"])
    assert section.names == ("p", "q") and section.inner == _Inner(("c", "d"), -1)
    assert section.table == {"train.lr": [1, "two"], "data.seed": [3]}  # a dotted override sets one mapping key
    assert load_dataclass(_Section, path, ["inner.layer=null"]).inner.layer is None
    for overrides, message in (
        (["seen=[a]"], r"unknown key 'seen' \(allowed here: inner, names, table\)"),
        (["inner.pairs=[a, b]"], r"unknown key 'inner\.pairs' \(allowed here: layer, pair\)"),
        (["inner.pair=[a]"], r"inner\.pair: expected a list of 2 items"),
        (["inner.layer=top"], r"inner\.layer: expected an integer"),
        (["names=[1]"], r"names\[0\]: expected a string"),
        (["table=[1]"], r"table: expected a mapping"),
    ):
        with pytest.raises(ConfigError, match=message):
            load_dataclass(_Section, path, overrides)


def test_tracking_uri_resolution_order(monkeypatch, isolated_home):
    assert resolve_tracking_uri() == f"sqlite:///{isolated_home / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////env/mlflow.db")
    assert resolve_tracking_uri() == "sqlite:////env/mlflow.db"
    assert resolve_tracking_uri("http://mlflow.example:5000") == "http://mlflow.example:5000"


@pytest.mark.parametrize("value", ["-1", "3"])
def test_min_workers_outside_0_to_num_workers_names_the_key(value):
    with pytest.raises(ConfigError, match=r"train\.min_workers: must be between 1 and train\.num_workers=2"):
        load_config(QUICKSTART, [f"train.min_workers={value}"])


@pytest.mark.parametrize("min_workers,expected", [(0, 2), (2, 2), (1, (1, 2))])
def test_min_workers_below_num_workers_gives_ray_train_a_worker_range(monkeypatch, min_workers, expected):
    from distalign.train import trainer

    scaling = []
    monkeypatch.setattr(trainer, "TorchTrainer", lambda fn, scaling_config, **kwargs: scaling.append(scaling_config))
    trainer.build_trainer(load_config(QUICKSTART, [f"train.min_workers={min_workers}"]), None, {}, None)
    assert scaling[0].num_workers == expected


def test_a_relative_path_is_the_working_directorys_first_then_the_config_files(tmp_path, monkeypatch):
    """As docs/reference/config.md says: the working directory wins where the path exists in both places."""
    from distalign.config import resolve_path
    from distalign.tools.reference import render_pages

    beside_config, cwd = tmp_path / "configs", tmp_path / "work"
    for folder in (beside_config, cwd):
        folder.mkdir()
    (beside_config / "only-here.tsv").write_text("a\tb\n")
    for folder in (beside_config, cwd):
        (folder / "both.tsv").write_text("a\tb\n")
    monkeypatch.chdir(cwd)
    assert resolve_path("only-here.tsv", beside_config) == str(beside_config / "only-here.tsv")
    assert resolve_path("both.tsv", beside_config) == str(cwd / "both.tsv")
    assert resolve_path("nowhere.tsv", beside_config) == str(cwd / "nowhere.tsv")
    assert "working directory first, then beside the config" in render_pages()["config.md"].replace("\n", " ")
