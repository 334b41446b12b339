"""Adding an objective as docs/explanations/architecture.md says, without touching any other file: a toy plugin defined
here, registered under ``objectives.toy``, with a data-side preparer. It is trained on 2 Ray workers in one run with the
toy stream's objective (``test_toy_stream.py``): one Ray Train start for both plugins."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch
from conftest import QUICKSTART, SMALL

from distalign.config import load_config
from distalign.data.batches import TensorSpec
from distalign.errors import require
from distalign.objectives import registry
from distalign.objectives.base import DataContext, Objective


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
    consumes = (
        "input_ids1",
        "attention_mask1",
        "word_mask1",
        "input_ids2",
        "attention_mask2",
        "word_mask2",
        "pair_weight",
    )
    prepares = (TensorSpec("pair_weight", "float32", "B", "random weight per pair"),)
    reference = "none: the docs' example"

    def __init__(self, margin: float):
        super().__init__()
        self.margin = margin

    @classmethod
    def validate(cls, cfg, facts, key):
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


def test_toy_objective_checks_its_config_before_training():
    with pytest.raises(Exception, match=r"objectives\.toy\.margin"):
        load_config(QUICKSTART, SMALL + ["objectives.toy.weight=1", "objectives.toy.margin=5"])


@pytest.fixture(autouse=True)
def toy_registered(monkeypatch):
    monkeypatch.setitem(registry.OBJECTIVES, "toy", ToyObjective)
