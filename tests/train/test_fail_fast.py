"""A deterministic error of the training code ends a Ray Train run after one restart, not ``train.max_failures``:
an objective plugin defined here raises at its 5th step, again after the restart from the step-3 checkpoint (its
step count is objective state, saved in checkpoints); ``run_training`` raises that error itself."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import ray.cloudpickle
import torch
from conftest import QUICKSTART, SMALL

from distalign.config import load_config
from distalign.objectives import registry
from distalign.objectives.base import Objective
from distalign.train.failures import WorkerTraceback
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow


@dataclass
class FailingConfig:
    weight: float = 0.0
    step: int = 5  # the step whose forward raises
    starts: str = ""  # a file each worker that builds the objective appends a line to


class FailingObjective(Objective):
    """A made-up loss on the constraint pairs' word vectors that raises ``ValueError`` in the forward of step
    ``step``, counting steps in a buffer: a resumed run counts on from its checkpoint."""

    Config = FailingConfig
    stream = "constraints"
    consumes = ("input_ids1", "attention_mask1", "word_mask1")
    reference = "none: a test's example"

    def __init__(self, step: int):
        super().__init__()
        self.step = step
        self.register_buffer("steps_done", torch.zeros((), dtype=torch.int64))

    @classmethod
    def build(cls, cfg, ctx):
        with open(cfg.starts, "a") as starts:
            starts.write("started\n")
        return cls(cfg.step)

    def forward(self, model, batch):
        if int(self.steps_done) + 1 == self.step:
            raise ValueError(f"injected failure at step {self.step}")
        return model.encode_words(batch["input_ids1"], batch["attention_mask1"], batch["word_mask1"]).pow(2).mean()

    def after_step(self):
        self.steps_done += 1


@pytest.fixture
def failing_objective_registered(monkeypatch):
    monkeypatch.setitem(registry.OBJECTIVES, "failing", FailingObjective)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray workers cannot import this test module
    yield
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_an_error_at_the_same_step_after_a_restart_ends_the_run_with_that_error(
    ray_local, distalign_home, failing_objective_registered, tmp_path, capsys
):
    starts = tmp_path / "starts"
    config = load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=fails-at-5",
            "train.num_workers=1",
            "train.max_steps=8",
            "train.max_failures=3",
            "eval.every=0",
            "objectives.mlm.weight=0",
            "objectives.lexical.weight=0",
            "objectives.failing.weight=1",
            f"objectives.failing.starts={starts}",
        ],
    )
    with pytest.raises(ValueError, match="injected failure at step 5") as raised:
        run_training(config)
    assert starts.read_text().splitlines() == ["started"] * 2  # one restart, not max_failures=3
    worker_traceback = raised.value.__cause__
    assert isinstance(worker_traceback, WorkerTraceback)
    assert "recipe.py" in str(worker_traceback) and f"{Path(__file__).name}" in str(worker_traceback)
    said = capsys.readouterr().out
    assert "failed after step 4: ValueError: injected failure at step 5 (again after a restart: not retried)" in said
