"""Adding a stream without touching any other file: a toy stream (each constraint's first word with its
length in characters) and a toy objective reading it, both defined and registered here, trained for a
few steps on 2 Ray workers together with the toy objective (``test_toy_objective.py``), so that
both plugin kinds share one Ray Train start."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import ray.cloudpickle
import test_toy_objective
from conftest import QUICKSTART, SMALL
from mlflow.tracking import MlflowClient

from distalign.config import load_config
from distalign.data.batches import TensorSpec
from distalign.data.stream_plugins import STREAMS, Stream
from distalign.data.tokenize import encode_words
from distalign.objectives import registry
from distalign.objectives.base import Objective
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class WordLengthTokens:
    max_tokens: int


class WordLengthStream(Stream):
    """Words with their length in characters, read on the driver from the run's constraint pairs."""

    name = "word_length"
    doc = "a word alone, with its length"
    batch_size_key = "train.constraint_batch_size"
    tensors = (
        TensorSpec("input_ids", "int64", "B,T"),
        TensorSpec("attention_mask", "int64", "B,T"),
        TensorSpec("word_mask", "int64", "B,T"),
        TensorSpec("length", "float32", "B"),
        TensorSpec("row", "int64", "B"),
    )
    Settings = WordLengthTokens

    def settings(self, facts, languages):
        return WordLengthTokens(facts.max_word_tokens)

    def table(self, prepared):
        words = prepared.constraints.column("word1")
        return pa.table(
            {
                "word": words,
                "length": pc.utf8_length(words).cast(pa.float32()),
                "row": pa.array(np.arange(len(words), dtype=np.int64)),
            }
        )

    def tokenize(self, batch, tokenizer, settings):
        out = encode_words(tokenizer, batch["word"].tolist(), settings.max_tokens)
        return out | {"length": batch["length"].astype(np.float32), "row": batch["row"].astype(np.int64)}


@dataclass
class WordLengthConfig:
    weight: float = 0.0


class WordLengthObjective(Objective):
    """Squared error between a word vector's mean and a tenth of its length (a made-up loss)."""

    Config = WordLengthConfig
    stream = "word_length"
    consumes = ("input_ids", "attention_mask", "word_mask", "length")
    reference = "none: a test's example"

    def forward(self, model, batch):
        h = model.encode_words(batch["input_ids"], batch["attention_mask"], batch["word_mask"]).float()
        return (h.mean(-1) - batch["length"] / 10).pow(2).mean()


@pytest.fixture
def toy_stream_registered(monkeypatch):
    monkeypatch.setitem(STREAMS, "word_length", WordLengthStream())
    monkeypatch.setitem(registry.OBJECTIVES, "word_length", WordLengthObjective)
    # Ray workers and data tasks cannot import this test module: ship its classes by value
    monkeypatch.setitem(registry.OBJECTIVES, "toy", test_toy_objective.ToyObjective)
    modules = (sys.modules[__name__], test_toy_objective)
    for module in modules:
        ray.cloudpickle.register_pickle_by_value(module)
    yield
    for module in modules:
        ray.cloudpickle.unregister_pickle_by_value(module)


def test_toy_stream_and_toy_objective_train_on_two_workers(ray_local, distalign_home, toy_stream_registered):
    config = load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=toy-plugins",
            "train.max_steps=4",
            "objectives.mlm.weight=0",
            "objectives.lexical.weight=0",
            "objectives.word_length.weight=1",
            "objectives.toy.weight=1",
        ],
    )
    assert config.objectives.streams() == {"word_length", "constraints"} and config.train.num_workers == 2
    outcome = run_training(config)
    client = MlflowClient(config.tracking.uri)
    assert client.get_run(outcome.run_id).info.status == "FINISHED"
    losses = client.get_metric_history(outcome.run_id, "Train/word_length_loss")
    assert [m.step for m in losses] == [2, 4]
    assert all(np.isfinite(m.value) and m.value > 0 for m in losses)
    run = client.get_run(outcome.run_id)
    assert run.data.params["objectives.toy.margin"] == "0.5"
    toy_losses = client.get_metric_history(outcome.run_id, "Train/toy_loss")
    assert [m.step for m in toy_losses] == [2, 4]
    assert all(0 < m.value < 2.5 for m in toy_losses)  # weights in [0, 1) times a hinge in [0, 2.5]
