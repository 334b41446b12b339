"""The how-to "Add a training stream" (docs/how-to/add-a-stream.md), run as written: its code block becomes a
module, a line each registers its stream and its objective, and a run prepares the stream's table and trains on it
for a few steps in this process (no Ray)."""

from __future__ import annotations

import importlib
import math
import re
import sys

import pytest
from conftest import QUICKSTART, REPO, SMALL

from distalign.config import load_config
from distalign.data.stream_plugins import STREAMS
from distalign.errors import ConfigError
from distalign.objectives import registry
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import local_streams
from distalign.train.recipe import TrainingRecipe
from distalign.train.trainer import plan_training

HOWTO = REPO / "docs" / "how-to" / "add-a-stream.md"


def howto_module_source() -> str:
    block = re.search(r"```python\n(.*?)```", HOWTO.read_text(), re.S).group(1)
    return "\n".join(line[3:] if line.startswith("   ") else line for line in block.splitlines()) + "\n"


@pytest.fixture
def word_length_plugins(tmp_path, monkeypatch):
    (tmp_path / "word_length.py").write_text(howto_module_source())
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("word_length")
    monkeypatch.setitem(STREAMS, "word_length", module.WordLengthStream())  # the stream's registry line
    monkeypatch.setitem(registry.OBJECTIVES, "word_length", module.WordLengthObjective)  # the objective's
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    yield module
    sys.modules.pop("word_length")


def word_length_config(*overrides: str):
    return load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=howto-stream",
            "train.max_steps=2",
            "objectives.mlm.weight=0",
            "objectives.lexical.weight=0",
            "objectives.word_length.weight=1",
            *overrides,
        ],
    )


def test_a_stream_added_by_the_howto_prepares_its_rows_and_trains(word_length_plugins, tmp_path, gloo_group):
    config = word_length_config("train.batch_sizes.word_length=8")
    assert config.objectives.streams() == {"word_length"}
    prepared = prepare_data(config)
    table = prepared.tables["word_length"]
    assert len(table) == len(prepared.constraints) and table["row"].to_pylist() == list(range(len(table)))
    assert table["length"].to_pylist() == [len(w) for w in prepared.constraints["word1"].to_pylist()]

    recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""))
    recipe.setup()
    losses, batches = [], []
    step = recipe.step

    def recording_step(micro_batches):
        batches.append(micro_batches)
        losses.append(step(micro_batches))
        return losses[-1]

    recipe.step = recording_step
    recipe.run(local_streams(prepared, config), lambda metrics, directory: None, lambda: tmp_path)
    assert [sorted(loss) for loss in losses] == [["Train/grad_norm", "Train/loss", "Train/word_length_loss"]] * 2
    assert all(math.isfinite(loss["Train/word_length_loss"]) for loss in losses)
    assert [len(micro[0]["word_length"]["row"]) for micro in batches] == [8, 8]  # train.batch_sizes.word_length


def test_a_stream_with_too_few_rows_for_a_batch_per_worker_fails_preparation_naming_the_key(word_length_plugins):
    config = word_length_config("train.batch_sizes.word_length=100000")
    with pytest.raises(
        ConfigError,
        match=r"data\.constraints: .* words, fewer than one batch per worker \(at least "
        r"train\.batch_sizes\.word_length=100000 x train\.num_workers=2",
    ):
        prepare_data(config, build_model=False)
