"""Tune study files: read by the loader of experiment configs (same errors, same dotted overrides)."""

import re
from pathlib import Path

import pytest
import yaml

from distalign.config import ConfigError, ExperimentConfig
from distalign.studies import StudyConfig, load_study

CONFIG_DIR = Path(__file__).resolve().parents[1] / "jobs" / "configs"
STUDIES = Path(__file__).resolve().parents[1] / "tuning"
SHIPPED = STUDIES / "quickstart.yaml"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def write_study(tmp_path, **changes) -> Path:
    """The shipped study, changed, with its base config as an absolute path."""
    raw = yaml.safe_load(SHIPPED.read_text()) | {"base": str(CONFIG_DIR / "quickstart.yaml")} | changes
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_shipped_study_file_loads_as_a_dataclass():
    study, trials = load_study(SHIPPED)
    raw = yaml.safe_load(SHIPPED.read_text())
    assert isinstance(study, StudyConfig)
    assert (study.study, study.base, study.metric, study.mode) == (
        raw["study"],
        "../jobs/configs/quickstart.yaml",
        raw["metric"],
        "max",
    )
    assert study.grid == {"train.lr": [1.0e-3, 3.0e-4], "data.max_constraints": [400, 1200]}
    assert study.overrides == raw["overrides"] and study.trial_cpus == 0.1
    assert len(trials) == 4 and all(isinstance(c, ExperimentConfig) for c in trials.values())


def test_unknown_study_key_names_it_and_the_allowed_keys(tmp_path):
    with pytest.raises(
        ConfigError,
        match=r"unknown key 'grids' \(allowed here: base, grid, language_samples, max_concurrent_trials, "
        r"max_failures, metric, mode, overrides, search, study, trial_cpus\)",
    ):
        load_study(write_study(tmp_path, grids={"train.lr": [1e-3]}))


def test_unknown_grid_key_is_named_with_its_dotted_path(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key 'train\.lrr' \(allowed here: .*lr,"):
        load_study(write_study(tmp_path, grid={"train.lrr": [1e-3]}))


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"mode": "best"}, r"mode: 'best' is not one of \['min', 'max'\]"),
        ({"max_concurrent_trials": "two"}, r"max_concurrent_trials: expected an integer"),
        ({"max_concurrent_trials": -1}, r"max_concurrent_trials: must be >= 0"),
        ({"grid": {"train.lr": 0.1}}, r"grid\.train\.lr: expected a list"),
        ({"grid": {"train.lr": []}}, r"grid\.train\.lr: must be a non-empty list"),
        ({"grid": {}}, r"^grid: must map"),
        ({"overrides": "train.lr=1"}, r"overrides: expected a list"),
        ({"base": "absent.yaml"}, r"base: experiment config not found: .*absent\.yaml"),
    ],
)
def test_wrong_study_values_name_the_key(tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message):
        load_study(write_study(tmp_path, **changes))


def test_overrides_of_the_study_and_of_every_trial():
    study, trials = load_study(
        SHIPPED, ["grid.train.lr=[1.0e-2]", "max_concurrent_trials=2", "mode=min", "train.max_steps=7"]
    )
    assert study.grid == {"train.lr": [1.0e-2], "data.max_constraints": [400, 1200]}  # one grid key replaced
    assert (study.max_concurrent_trials, study.mode) == (2, "min")
    assert {(c.train.lr, c.data.max_constraints) for c in trials.values()} == {(1e-2, 400), (1e-2, 1200)}
    assert all(c.train.max_steps == 7 and c.eval.every == 30 for c in trials.values())  # after the file's overrides


def test_bad_overrides_name_the_key():
    with pytest.raises(ConfigError, match=r"mode: 'fastest' is not one of"):
        load_study(SHIPPED, ["mode=fastest"])
    with pytest.raises(ConfigError, match=r"unknown key 'train\.lrr'"):
        load_study(SHIPPED, ["train.lrr=1"])
    with pytest.raises(ConfigError, match=r"unknown key 'data\.max_constraint'"):
        load_study(SHIPPED, ["grid.data.max_constraint=[1]"])


def search_study(tmp_path, **search) -> Path:
    return write_study(tmp_path, grid={}, search={"space": {"train.lr": {"loguniform": [1e-4, 1e-2]}}, **search})


def test_a_search_study_checks_its_space_before_it_runs(tmp_path):
    study, trials = load_study(search_study(tmp_path, num_samples=3, scheduler="asha"))
    assert study.search.space == {"train.lr": {"loguniform": [1e-4, 1e-2]}} and study.search.scheduler == "asha"
    (base,) = trials.values()  # the config every suggested trial starts from
    assert base.train.max_steps == 60
    for space, message in [
        ({"train.lr": {"loguniform": [1e-2, 1e-4]}}, r"search\.space\.train\.lr: one of"),
        ({"train.lr": {"normal": [0, 1]}}, r"search\.space\.train\.lr: one of"),
        ({"train.lrr": {"choice": [1e-3]}}, r"unknown key 'train\.lrr'"),
        ({"train.max_steps": {"randint": [-5, 10]}}, r"train\.max_steps"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_study(write_study(tmp_path, grid={}, search={"space": space}))
    with pytest.raises(ConfigError, match="seeds > 1 with scheduler asha"):
        load_study(search_study(tmp_path, seeds=3, scheduler="asha"))
    with pytest.raises(ConfigError, match="a grid .* or a search, not both"):
        load_study(write_study(tmp_path, search={"space": {"train.lr": {"choice": [1e-3]}}}))


def test_concurrent_trials_are_as_many_as_the_cluster_holds(caplog):
    import logging

    from distalign.train.trial_resources import concurrent_trials, trial_resources

    study, trials = load_study(STUDIES / "search_tiny.yaml")  # lexical only, 1 worker of 0.5 CPU
    config = next(iter(trials.values()))
    assert trial_resources(study, config) == {"CPU": 0.1 + 0.5 + 0.25}  # trial, worker, one tokenising task
    assert concurrent_trials(study, [config], {"CPU": 2.0}) == 2
    assert concurrent_trials(study, [config], {"CPU": 16.0, "GPU": 1.0}) == 18
    assert concurrent_trials(study, [config], {"CPU": 0.5}) == 1  # at least one (an autoscaler may add nodes)
    mlm = load_config_like(config, ["train.num_workers=2", "train.use_gpu=true"])  # + the corpus reservation
    assert trial_resources(study, mlm) == {"CPU": 0.1 + 2 * (0.5 + 0.25 + 0.25), "GPU": 2.0}
    assert concurrent_trials(study, [config, mlm], {"CPU": 64.0, "GPU": 4.0}) == 2  # the largest trial, by GPUs
    study.max_concurrent_trials = 8
    logger = logging.getLogger("distalign")
    logger.addHandler(caplog.handler)
    try:
        assert concurrent_trials(study, [config], {"CPU": 2.0}) == 8
    finally:
        logger.removeHandler(caplog.handler)
    assert "the cluster holds 2 trials" in caplog.text


def load_config_like(config: ExperimentConfig, overrides: list[str]) -> ExperimentConfig:
    from distalign.config import apply_override, from_dict

    data = config.to_dict()
    for override in overrides + ["objectives.mlm.weight=1"]:
        apply_override(data, override, ExperimentConfig)
    return from_dict(ExperimentConfig, data)


def test_a_language_sample_short_of_constraints_fails_before_ray_naming_the_trial(capsys, monkeypatch):
    from distalign.cli import main

    monkeypatch.setattr("distalign.ray_session.ensure_ray", lambda: pytest.fail("Ray was started"))
    assert main(["tune", str(STUDIES / "language_samples_tiny.yaml"), "language_samples.per_pair=500"]) == 2
    err = capsys.readouterr().err
    trials = re.findall(
        r"trial (language-samples-tiny-\d+): data.constraints_per_pair=500: these language pairs have "
        r"fewer constraints",
        err,
    )
    assert err.startswith(f"distalign: error: {len(trials)} problems:") and len(set(trials)) == len(trials) > 1, err


def test_language_samples_select_on_validation_pairs_and_hold_the_test_pairs_for_the_final_score():
    """BabelBERT §5.1: checkpoints are selected on pairs without a test language; the test pairs are read,
    kept out of training and out of the in-loop evaluation, and score the trial after training."""
    from distalign.preparation.inputs import prepare_data

    study, trials = load_study(STUDIES / "language_samples_tiny.yaml")
    assert study.metric == "test/bli/avg/mrr"
    for config in trials.values():
        assert config.eval.test_languages == ["fi", "tr"] and config.eval.languages == ["en", "de"]
    prepared = prepare_data(next(iter(trials.values())))
    assert [(p.lang1, p.lang2) for p in prepared.eval_pairs] == [("en", "de")]
    assert [(p.lang1, p.lang2) for p in prepared.test_pairs] == [("fi", "tr")]
    test = prepared.test_pairs[0]
    trained = set(prepared.constraints["word1"].to_pylist()) | set(prepared.constraints["word2"].to_pylist())
    assert test.src and not (set(test.src) | set(test.tgt)) & trained


def test_validation_pairs_that_share_a_test_language_fail_before_ray(capsys, monkeypatch):
    from distalign.cli import main

    monkeypatch.setattr("distalign.ray_session.ensure_ray", lambda: pytest.fail("Ray was started"))
    assert main(["tune", str(STUDIES / "language_samples_tiny.yaml"), "eval.languages=[en,fi]"]) == 2
    assert "eval.languages: shares ['fi'] with eval.test_languages" in capsys.readouterr().err
    # one language: no pair to select on
    assert main(["tune", str(STUDIES / "language_samples_tiny.yaml"), "eval.languages=[en]"]) == 2
    assert "leave no validation pair to select checkpoints on" in capsys.readouterr().err


def test_a_language_sample_study_is_scored_on_its_test_pairs():
    with pytest.raises(ConfigError, match=r"metric: eval/bli/avg/mrr is scored on the validation pairs"):
        load_study(STUDIES / "language_samples_tiny.yaml", ["metric=eval/bli/avg/mrr"])


def test_split_of_evaluation_dictionaries_into_validation_and_test():
    from distalign.data.sources import DictionarySource
    from distalign.preparation.inputs import split_eval_dictionaries

    sources = [
        DictionarySource(f"{a}-{b}.tsv", a, b)
        for a, b in [("en", "it"), ("de", "ru"), ("en", "fi"), ("fi", "tr"), ("tr", "ko"), ("de", "it")]
    ]
    validation, test = split_eval_dictionaries(sources, [], ["fi", "tr", "ko"])
    assert [s.path for s in validation] == ["en-it.tsv", "de-ru.tsv", "de-it.tsv"]  # en-fi: a test language
    assert [s.path for s in test] == ["fi-tr.tsv", "tr-ko.tsv"]
    validation, _ = split_eval_dictionaries(sources, ["en", "it", "de", "ru"], ["fi", "tr"])
    assert [s.path for s in validation] == ["en-it.tsv", "de-ru.tsv", "de-it.tsv"]
    assert split_eval_dictionaries(sources, ["de", "ru"], []) == ([sources[1]], [])  # no test languages: as before
    with pytest.raises(ValueError, match=r"eval.test_languages: no evaluation dictionary between \['bg', 'ca'\]"):
        split_eval_dictionaries(sources, [], ["bg", "ca"])
