"""tracking.registered_model_name: a checkpoint's model logged into its run as an MLflow transformers model and
registered, on a sqlite store (tests/test_mlflow_stack.py does it against PostgreSQL and S3 behind the server)."""

from __future__ import annotations

import os

import mlflow
import pytest
import torch
from mlflow.tracking import MlflowClient
from transfer_data import tiny_model

from distalign.checkpoint import MODEL_DIR
from distalign.config import ConfigError, load_config
from distalign.models.loading import load_masked_lm, load_tokenizer
from distalign.studies.tune_run import register_best_trial
from distalign.tracking import CHECKPOINT_TAG, tracked_run
from distalign.train.model_registry import register_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A checkpoint directory as training writes it, as far as registration reads it: the model and tokenizer."""
    directory = tmp_path_factory.mktemp("checkpoint_000001")
    tiny_model(directory / MODEL_DIR)
    return directory


@pytest.fixture(scope="module")
def uri(tmp_path_factory):
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow')}/mlflow.db"


def test_a_checkpoint_is_logged_into_its_run_and_registered_as_a_fill_mask_model(uri, checkpoint, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    client = MlflowClient(uri)
    with tracked_run(uri, "registry", "r", "/store", {}, {}) as run_id:
        version = register_checkpoint(uri, run_id, str(checkpoint), "", "tiny-registered")
    assert "MLFLOW_TRACKING_URI" not in os.environ  # MLflow sets it while logging: put back as it was
    assert int(version.version) == 1 and version.run_id == run_id
    assert version.tags[CHECKPOINT_TAG] == str(checkpoint)
    run = client.get_run(run_id)
    [output] = run.outputs.model_outputs  # the run's logged model, the version's source
    assert version.source == f"models:/{output.model_id}"
    # beside the run, not in MLflow's default experiment
    assert client.get_logged_model(output.model_id).experiment_id == run.info.experiment_id

    with mlflow.tracking._tracking_service.utils._use_tracking_uri(uri):
        components = mlflow.transformers.load_model("models:/tiny-registered/1", return_type="components")
    assert components["task"] == "fill-mask"
    model_dir = str(checkpoint / MODEL_DIR)
    tokenizer = load_tokenizer(model_dir)
    batch = tokenizer(["ana river", "a sentence"], return_tensors="pt", padding=True)
    assert components["tokenizer"](["ana river"])["input_ids"] == tokenizer(["ana river"])["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(
            components["model"].eval()(**batch).logits, load_masked_lm(model_dir).eval()(**batch).logits
        )


def test_a_studys_best_trial_is_registered_from_its_own_run(uri, checkpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    config = load_config(None, [f"tracking.uri={uri}", "tracking.registered_model_name=study-best"])
    client = MlflowClient(uri)
    with tracked_run(uri, "studies", "study", "/store", {}, {}) as parent:
        for trial in ("study-000", "study-001"):
            with tracked_run(uri, "studies", trial, "/store", {}, {}, parent_run_id=parent):
                pass
        register_best_trial(client, parent, config)  # no scored trial yet: nothing
        assert not client.search_registered_models("name = 'study-best'")
        client.set_tag(parent, "distalign.best_trial", "study-001")
        client.set_tag(parent, "distalign.best_checkpoint", str(checkpoint))
        register_best_trial(client, parent, config)
    version = client.get_model_version("study-best", "1")
    assert client.get_run(version.run_id).info.run_name == "study-001"
    assert version.tags[CHECKPOINT_TAG] == str(checkpoint)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["tracking.registered_model_name=team/model"], "must not contain '/' or ':'"),
        (["tracking.registered_model_name=m", "model.adapters.enabled=true"], "a model with adapters cannot be"),
        (
            ["tracking.registered_model_name=m", "objectives.mlm.weight=0", "objectives.dict_mlm.weight=1"],
            "a model with objectives.dict_mlm's input language table cannot be",
        ),
    ],
)
def test_a_model_registration_the_flavour_cannot_load_is_refused(overrides, message):
    with pytest.raises(ConfigError, match=rf"tracking\.registered_model_name: {message}"):
        load_config(None, overrides)
