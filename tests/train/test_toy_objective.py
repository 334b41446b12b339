"""Adding an objective as the README says, without touching any other file: a toy plugin defined here,
registered under ``objectives.toy``, trained for a few steps on 2 workers with a data-side preparer."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pytest
import ray.cloudpickle
import torch
from mlflow.tracking import MlflowClient

from conftest import QUICKSTART, SMALL
from distalign.config import load_config
from distalign.data.batches import TensorSpec
from distalign.errors import require
from distalign.objectives import registry
from distalign.objectives.base import DataContext, Objective
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow


@dataclass
class ToyConfig:
    weight: float = 0.0
    margin: float = 0.5  # pairs closer than this in cosine are pulled together


@dataclass(frozen=True)
class PairWeights:
    """Data-side preparer: a random weight per pair, from the pair's own random stream."""

    def __call__(self, batch, random):
        return {"pair_weight": random.rand(1)[:, 0].numpy().astype(np.float32)}


class ToyObjective(Objective):
    """Weighted hinge on the cosine of each constraint pair's two word vectors (a made-up loss)."""

    Config = ToyConfig
    stream = "constraints"
    consumes = ("input_ids1", "attention_mask1", "word_mask1", "input_ids2", "attention_mask2", "word_mask2",
                "pair_weight")
    prepares = (TensorSpec("pair_weight", "float32", "B", "random weight per pair"),)
    reference = "none: the README's example"

    def __init__(self, margin: float):
        super().__init__()
        self.margin = margin

    @classmethod
    def validate(cls, cfg, experiment, key):
        require(0 <= cfg.margin <= 2, f"{key}.margin", "must be in [0, 2]")

    @classmethod
    def batch_preparer(cls, cfg, ctx: DataContext):
        return PairWeights()

    @classmethod
    def build(cls, cfg, ctx):
        return cls(cfg.margin)

    def forward(self, model, batch):
        a = model.encode_words(batch["input_ids1"], batch["attention_mask1"], batch["word_mask1"])
        b = model.encode_words(batch["input_ids2"], batch["attention_mask2"], batch["word_mask2"])
        cosine = torch.nn.functional.cosine_similarity(a.float(), b.float())
        return (batch["pair_weight"] * torch.relu(self.margin + 1 - cosine)).mean()


@pytest.fixture
def toy_registered(monkeypatch):
    monkeypatch.setitem(registry.OBJECTIVES, "toy", ToyObjective)
    # Ray workers cannot import this test module: ship its classes by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_toy_objective_trains_on_two_workers(ray_local, distalign_home, toy_registered):
    with pytest.raises(Exception, match=r"objectives\.toy\.margin"):
        load_config(QUICKSTART, SMALL + ["objectives.toy.weight=1", "objectives.toy.margin=5"])
    config = load_config(QUICKSTART, SMALL + ["run.name=toy", "train.max_steps=4", "objectives.mlm.weight=0",
                                              "objectives.lexical.weight=0", "objectives.toy.weight=1"])
    outcome = run_training(config)
    client = MlflowClient(config.tracking.uri)
    run = client.get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["objectives.toy.margin"] == "0.5"
    losses = client.get_metric_history(outcome.run_id, "train/toy_loss")
    assert [m.step for m in losses] == [2, 4]
    assert all(0 < m.value < 2.5 for m in losses)  # weights in [0, 1) times a hinge in [0, 2.5]
