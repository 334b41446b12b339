"""Objectives beyond the quickstart's, each in a 2-worker DDP run: BabelBERT's sense level with adapters,
DICT-MLM (dict-TLM variant) with a resume that restores its objective-owned parameters."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient
from safetensors.torch import load_file

from conftest import QUICKSTART, SMALL
from distalign.config import load_config
from distalign.models.adapters import ADAPTER_CONFIG, ADAPTER_WEIGHTS, load_masked_lm_with_adapters
from distalign.models.loading import load_masked_lm
from distalign.train.checkpoint import OBJECTIVES_FILE
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow


def test_sense_level_lexical_with_adapters_trains_only_adapters(ray_local, distalign_home):
    config = load_config(QUICKSTART, SMALL + [
        "run.name=babelbert-adapters", "objectives.mlm.weight=0", "objectives.lexical.sense_level=true",
        "objectives.lexical.gloss_weight=0.5", "model.adapters.enabled=true", "model.adapters.reduction_factor=8"])
    outcome = run_training(config)
    client = MlflowClient(config.tracking.uri)
    assert client.get_run(outcome.run_id).info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(outcome.run_id, "train/lexical_loss")] == [2, 4, 6]

    exported = Path(outcome.checkpoint) / "model"
    assert (exported / ADAPTER_CONFIG).is_file() and (exported / ADAPTER_WEIGHTS).is_file()
    # the base weights are the untouched initial tiny model; all learning sits in the adapters
    initial = load_masked_lm(str(Path(config.data.output_dir) / "tiny-model")).state_dict()
    trained = load_masked_lm(str(exported)).state_dict()
    assert all(torch.equal(initial[k], trained[k]) for k in initial)
    adapters = load_file(str(exported / ADAPTER_WEIGHTS))
    up = [v for k, v in adapters.items() if k.endswith(".up.weight")]
    assert up and all(v.abs().sum() > 0 for v in up)  # zero-initialised, moved by training
    assert len(list(load_masked_lm_with_adapters(str(exported)).base_model.encoder.layer)) == 2


def test_dict_tlm_run_checkpoints_its_language_parameters_and_resumes(ray_local, distalign_home):
    overrides = SMALL + ["run.name=dict-tlm", "objectives.mlm.weight=0", "objectives.lexical.weight=0",
                         "objectives.dict_mlm.weight=1", "objectives.dict_mlm.tlm=true",
                         "objectives.dict_mlm.keep_original=0.5"]
    first = run_training(load_config(QUICKSTART, overrides + ["train.max_steps=4", "train.checkpoint_every=2"]))
    second = run_training(load_config(QUICKSTART, overrides))  # max_steps 6: resumes at 4
    client = MlflowClient(load_config(QUICKSTART, overrides).tracking.uri)
    assert second.run_id == first.run_id
    assert sorted(m.step for m in client.get_metric_history(second.run_id, "train/dict_mlm_loss")) == [2, 4, 6]
    states = [torch.load(Path(o.checkpoint) / OBJECTIVES_FILE, weights_only=False) for o in (first, second)]
    key = "dict_mlm.language_embeddings.embedding.weight"
    assert key in states[0]
    # zero-initialised language embeddings were trained, saved, and kept training after the resume
    assert states[0][key].abs().sum() > 0 and not torch.equal(states[0][key], states[1][key])
