"""Evaluation interval and training length (the run's schedule): fixed steps, or fractions/multiples of an
epoch of the main stream; derived once, never written back into the config."""

from types import SimpleNamespace

from conftest import QUICKSTART

from distalign.config import load_config
from distalign.preparation.schedule import RunSchedule, run_schedule

PREPARED = SimpleNamespace(tables={"constraints": [0] * 1000}, corpus_rows=640)


def test_every_steps_by_default():
    assert run_schedule(load_config(QUICKSTART, ["eval.every=7"]), PREPARED).eval_every == 7


def test_quarter_epoch_of_the_constraint_stream():
    # 1000 pairs / (2 workers x 32 pairs) = 15 steps per epoch -> every round(3.75) = 4 steps
    assert run_schedule(load_config(QUICKSTART, ["eval.every_epochs=0.25"]), PREPARED).eval_every == 4


def test_corpus_stream_when_no_objective_reads_constraints():
    # corpus epochs count sentences: one a sequence (packed, the default, is refused with them)
    config = load_config(
        QUICKSTART, ["eval.every_epochs=0.5", "objectives.lexical.weight=0", "data.pack_sequences=false"]
    )
    assert run_schedule(config, PREPARED).eval_every == 10  # 640 / (2 x 16) = 20 steps per epoch
    assert run_schedule(load_config(QUICKSTART, ["eval.every_epochs=0.001"]), PREPARED).eval_every == 1  # constraints


def test_epochs_set_max_steps_from_the_data():
    config = load_config(QUICKSTART, ["train.epochs=2", "train.max_steps=5"])
    assert run_schedule(config, PREPARED).max_steps == 30  # 2 x 15 steps per epoch; train.max_steps is replaced
    assert config.train.max_steps == 5  # the config stays as the user wrote it


def test_without_epochs_max_steps_stays():
    config = load_config(QUICKSTART, ["train.max_steps=5", "eval.every=3"])
    assert run_schedule(config, PREPARED) == RunSchedule(max_steps=5, eval_every=3)
