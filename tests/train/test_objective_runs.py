"""Objectives beyond the quickstart's, each in a 2-worker DDP run of its shipped tiny config (shrunk to a few
steps): BabelBERT's sense level with adapters, DICT-MLM (dict-TLM variant), sense-aware alignment;
and static-vector alignment towards vectors made with the user's commands (extract, align)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient
from safetensors.torch import load_file

from conftest import QUICKSTART, REPO, SENSE_AWARE_SMALL, SMALL
from distalign.config import load_config
from distalign.models.adapters import ADAPTER_CONFIG, ADAPTER_WEIGHTS, load_masked_lm_with_adapters
from distalign.models.language_embeddings import read_input_languages
from distalign.models.loading import load_masked_lm
from distalign.checkpoint import OBJECTIVES_FILE, OPTIMIZER_FILE
from distalign.tracking import START_MODEL_TAG
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow
CONFIGS = REPO / "jobs" / "configs"


def test_sense_level_lexical_with_adapters_trains_only_adapters(ray_local, distalign_home):
    config = load_config(CONFIGS / "babelbert_sense_adapters_tiny.yaml", SMALL)
    outcome = run_training(config)
    client = MlflowClient(config.tracking.uri)
    assert client.get_run(outcome.run_id).info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(outcome.run_id, "train/lexical_loss")] == [2, 4, 6]

    exported = Path(outcome.checkpoint) / "model"
    assert (exported / ADAPTER_CONFIG).is_file() and (exported / ADAPTER_WEIGHTS).is_file()
    assert json.loads((exported / ADAPTER_CONFIG).read_text())["placement"] == "pfeiffer"  # BabelBERT's, by default
    # the base weights are the untouched initial tiny model; all learning sits in the adapters
    initial = load_masked_lm(client.get_run(outcome.run_id).data.tags[START_MODEL_TAG]).state_dict()
    trained = load_masked_lm(str(exported)).state_dict()
    assert all(torch.equal(initial[k], trained[k]) for k in initial)
    adapters = load_file(str(exported / ADAPTER_WEIGHTS))
    up = [v for k, v in adapters.items() if k.endswith(".up.weight")]
    assert up and all(v.abs().sum() > 0 for v in up)  # zero-initialised, moved by training
    assert len(list(load_masked_lm_with_adapters(str(exported)).base_model.encoder.layer)) == 2


def test_dict_tlm_run_trains_and_checkpoints_its_language_parameters(ray_local, distalign_home):
    # (restoring objective-owned state on resume: the ZeRO-2 runs in test_tiny_configs.py); with LAMB, the
    # optimizer of DICT-MLM's published setting (dict_mlm.yaml)
    config = load_config(CONFIGS / "dict_mlm_tiny.yaml", SMALL + ["run.name=dict-tlm", "objectives.dict_mlm.tlm=true",
                                                                  "train.optimizer=lamb"])
    outcome = run_training(config)
    client = MlflowClient(config.tracking.uri)
    assert sorted(m.step for m in client.get_metric_history(outcome.run_id, "train/dict_mlm_loss")) == [2, 4, 6]
    state = torch.load(Path(outcome.checkpoint) / OBJECTIVES_FILE, weights_only=True)
    # zero-initialised language embeddings were trained and saved beside the model, not in it
    assert state["dict_mlm.language_embeddings.embedding.weight"].abs().sum() > 0
    assert "dict_mlm" not in str(load_masked_lm(str(Path(outcome.checkpoint) / "model")).state_dict().keys())
    table = read_input_languages(Path(outcome.checkpoint) / "model")  # the input table, exported (DICT-MLM §3.1)
    assert table.languages == ("xa", "xb", "xc")
    assert torch.equal(table.embedding.weight, state["dict_mlm.language_embeddings.embedding.weight"])
    optimizer = torch.load(Path(outcome.checkpoint) / OPTIMIZER_FILE, weights_only=True)["optimizer"]
    groups = optimizer["param_groups"]  # LAMB's settings; biases and LayerNorm weights without decay or trust ratio
    assert set(groups[0]) - {"params", "initial_lr"} == {"lr", "betas", "eps", "weight_decay", "adapt"}
    assert [(g["weight_decay"], g["adapt"]) for g in groups] == [(config.train.weight_decay, True), (0.0, False)]
    assert optimizer["state"] and all(s["step"] == 6 for s in optimizer["state"].values())  # LAMB's, not AdamW's


def test_static_vectors_extracted_aligned_and_trained_towards(ray_local, distalign_home, tmp_path, capsys):
    from gensim.models import KeyedVectors

    from distalign.cli import main as distalign
    from distalign.preparation.inputs import prepare_data

    overrides = SMALL + ["run.name=static", "objectives.lexical.weight=0"]
    prepared = prepare_data(load_config(QUICKSTART, overrides))  # the world and the tiny model of this run
    corpora = {source.lang: source.paths for source in prepared.corpus.sources}
    for lang in ("xa", "xb"):  # the user's commands, as static_align.yaml's header gives them
        assert distalign(["static", "extract", "--model", prepared.model_path, "--corpus", *corpora[lang],
                          "--out", str(tmp_path / f"{lang}.vec"), "--layer", "1", "--epochs", "2",
                          "--min-count", "2"]) == 0
    assert f"static vectors from 300 sentences -> {tmp_path / 'xb.vec'}" in capsys.readouterr().out
    pairs = prepared.constraints.filter((prepared.constraints["lang1"].to_numpy(zero_copy_only=False) == "xa")
                                        & (prepared.constraints["lang2"].to_numpy(zero_copy_only=False) == "xb"))
    seed = tmp_path / "seed.xb-xa.tsv"
    seed.write_text("".join(f"{b}\t{a}\n" for a, b in zip(pairs["word1"].to_pylist(), pairs["word2"].to_pylist())))
    assert distalign(["static", "align", "--src", str(tmp_path / "xb.vec"), "--tgt", str(tmp_path / "xa.vec"),
                      "--dictionary", str(seed), "--out", str(tmp_path / "xb.aligned.vec"), "--iterations", "1",
                      "--tgt-out", str(tmp_path / "xa.normalised.vec")]) == 0
    seed_pairs, missing = map(int, re.search(r"seed pairs (\d+) \((\d+) with", capsys.readouterr().out).groups())
    assert seed_pairs > missing
    for name in ("xa.vec", "xb.vec", "xb.aligned.vec", "xa.normalised.vec"):  # gensim reads every file written
        assert KeyedVectors.load_word2vec_format(str(tmp_path / name), binary=False).vector_size == 64

    config = load_config(QUICKSTART, overrides + [
        "objectives.static.weight=1", "train.static_batch_size=16",
        f'data.static_vectors=[{{path: "{tmp_path / "xa.normalised.vec"}", lang: xa}}, '
        f'{{path: "{tmp_path / "xb.aligned.vec"}", lang: xb}}]'])
    outcome = run_training(config)
    client = MlflowClient(config.tracking.uri)
    losses = sorted(client.get_metric_history(outcome.run_id, "train/static_loss"), key=lambda m: m.step)
    assert [m.step for m in losses] == [2, 4, 6]
    assert losses[-1].value < losses[0].value  # the contextual vectors move towards the static ones


def test_sense_aware_run_fits_its_sense_state_and_exports_the_original_model(ray_local, distalign_home):
    # (its resume, which restores the sense state, runs under ZeRO-2 in test_tiny_configs.py)
    config = load_config(CONFIGS / "sense_aware_tiny.yaml", SMALL + SENSE_AWARE_SMALL)
    outcome = run_training(config)
    client = MlflowClient(config.tracking.uri)
    assert sorted(m.step for m in client.get_metric_history(outcome.run_id, "train/sense_aware_loss")) == [2, 4, 6]
    state = torch.load(Path(outcome.checkpoint) / OBJECTIVES_FILE, weights_only=True)["sense_aware._extra_state"]
    assert int(state["step"]) == 6 and int(state["fitted"]) == 1 and state["proj"].abs().sum() > 0
    # the exported model keeps the original architecture (sense vectors are not exported)
    initial = load_masked_lm(client.get_run(outcome.run_id).data.tags[START_MODEL_TAG]).config.vocab_size
    assert load_masked_lm(str(Path(outcome.checkpoint) / "model")).config.vocab_size == initial
