"""Tune trials: every trial's config is built and validated the same way, from a typed identity, and what
Tune hands a trial is a dataclass (pickled as it travels), never a plain dict."""

import dataclasses
import pickle
import types

import pytest
from test_study_config import SHIPPED

from distalign.config import ConfigError
from distalign.studies import tune_run
from distalign.studies.shared_inputs import SharedInputs
from distalign.studies.study import load_study
from distalign.studies.trials import TAG, GridTrial, SearchBase, TrialIdentity

NONE_SHARED = SharedInputs({})  # the study prepared nothing for these trials


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


@pytest.fixture
def started(monkeypatch):
    """The configs the trial functions would train (``run_training`` intercepted)."""
    import distalign.train.trainer as trainer

    configs = []

    def run_training(config, callbacks=None, clock=None, trial_report=None, checked=None):
        configs.append(config)
        test = (
            {"test/bli/fi-tr/mrr": 0.25, "test/bli/avg/mrr": 0.25, "test/step": 20}
            if config.eval.test_languages
            else {}
        )
        return trainer.TrainingOutcome("run-1", "", {"step": 40}, "", test)

    monkeypatch.setattr(trainer, "run_training", run_training)
    # a trial's own checks read its inputs (tests/test_study_sharing.py): here only the config it trains matters
    monkeypatch.setattr("distalign.train.preflight.check_run", lambda config, **kwargs: None)
    monkeypatch.setattr("ray.tune.get_context", lambda: types.SimpleNamespace(get_trial_id=lambda: "abc123"))
    monkeypatch.setattr("ray.tune.integration.ray_train.TuneReportCallback", lambda: None)  # needs a Tune session
    return configs


def test_a_trial_with_test_pairs_reports_their_scores_last(started, monkeypatch):
    """After training, the test pairs' scores (from the selected checkpoint) are the trial's last Tune result:
    the study's metric and table read them; a trial without test pairs reports nothing more."""
    reported = []
    monkeypatch.setattr("ray.tune.report", lambda metrics: reported.append(metrics))
    _, trials = load_study(SHIPPED.parent / "language_samples_tiny.yaml")
    name, config = next(iter(trials.items()))
    tune_run._trial({"trial": GridTrial(TrialIdentity(name, 0, {}, "p"), {}, config.to_dict())}, NONE_SHARED)
    assert reported == [{"test/bli/fi-tr/mrr": 0.25, "test/bli/avg/mrr": 0.25, "test/step": 20, "step": 40}]
    _, name, config = shipped_trial()
    tune_run._trial({"trial": GridTrial(TrialIdentity(name, 0, {}, "p"), {}, config.to_dict())}, NONE_SHARED)
    assert len(reported) == 1


def shipped_trial():
    study, trials = load_study(SHIPPED)
    name, config = next(iter(trials.items()))
    return study, name, config


def test_grid_trial_is_validated_like_a_search_trial(started):
    _, name, config = shipped_trial()
    identity = TrialIdentity(name, config.train.seed, dict(config.tracking.tags), "parent-1")
    bad = config.to_dict()
    bad["train"]["lr"] = -1.0
    with pytest.raises(ConfigError, match=r"train\.lr"):
        tune_run._trial({"trial": GridTrial(identity, {}, bad)}, NONE_SHARED)
    with pytest.raises(ConfigError, match=r"train\.lr"):
        tune_run._search_trial(
            {"trial": SearchBase("s", config.to_dict(), "parent-1"), "point": {"train.lr": -1.0}}, NONE_SHARED
        )
    assert not started


def test_trial_identity_is_applied_before_validation_never_written_back(started):
    _, name, config = shipped_trial()
    data = config.to_dict()
    before = pickle.dumps(data)
    tune_run._search_trial(
        {"trial": SearchBase("s", data, "parent-1"), "point": {"train.lr": 0.002}, "__trial_index__": 2}, NONE_SHARED
    )
    tune_run._trial({"trial": GridTrial(TrialIdentity(name, 5, {"t": "v"}, "parent-1"), {}, data)}, NONE_SHARED)
    search, grid = started
    assert (search.run.name, search.train.seed, search.train.lr) == ("s-abc123", config.train.seed + 2, 0.002)
    assert search.tracking.tags == {f"{TAG}train.lr": "0.002", f"{TAG}train.seed": str(config.train.seed + 2)}
    assert (grid.run.name, grid.train.seed, grid.tracking.tags) == (name, 5, {"t": "v"})
    assert search.tracking.parent_run_id == grid.tracking.parent_run_id == "parent-1"
    assert pickle.dumps(data) == before  # the payload's config is not touched


class CapturedTuner:
    """Stands in for ``ray.tune.Tuner`` at the runner's call sites: keeps what would be sent to the trials."""

    def __init__(self, trainable, param_space, **kwargs):
        self.param_space = param_space


def test_tune_trials_receive_dataclasses_not_dicts(monkeypatch):
    monkeypatch.setattr("ray.tune.Tuner", CapturedTuner)
    study, _, config = shipped_trial()
    _, trials = load_study(SHIPPED)
    grid = tune_run._grid_tuner(lambda params: None, trials, "parent-1", None, 1).param_space["trial"]
    search = tune_run._search_tuner(study, config, lambda params: None, "parent-1", None, 1).param_space["trial"]
    sent = list(grid["grid_search"]) + [search]
    assert len(sent) == len(trials) + 1
    for payload in sent:
        assert dataclasses.is_dataclass(payload) and not isinstance(payload, dict)
        assert pickle.loads(pickle.dumps(payload)) == payload
    assert {payload.identity.name for payload in sent[:-1]} == set(trials)
    assert all(payload.identity.parent_run_id == "parent-1" for payload in sent[:-1])
