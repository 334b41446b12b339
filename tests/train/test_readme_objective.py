"""The docs' "Adding an objective" example (docs/explanations/architecture.md), run as written: its code block becomes a
module, one registry entry makes ``objectives.pair_cosine`` a config section, and the recipe trains it (no Ray)."""

from __future__ import annotations

import importlib
import re
import sys

from conftest import QUICKSTART, REPO, SMALL

from distalign.config import load_config
from distalign.objectives import registry
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import local_streams
from distalign.train.recipe import TrainingRecipe
from distalign.train.trainer import plan_training


def readme_plugin_source() -> str:
    section = (
        REPO.joinpath("docs", "explanations", "architecture.md").read_text().split("### Adding an objective", 1)[1]
    )
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    return "\n".join(line[3:] if line.startswith("   ") else line for line in block.splitlines()) + "\n"


def test_readme_objective_trains(tmp_path, monkeypatch, gloo_group):
    (tmp_path / "pair_cosine.py").write_text(readme_plugin_source())
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("pair_cosine")
    monkeypatch.setitem(registry.OBJECTIVES, "pair_cosine", module.PairCosineObjective)  # the registry line
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    config = load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=readme",
            "train.max_steps=2",
            "objectives.mlm.weight=0",
            "objectives.lexical.weight=0",
            "objectives.pair_cosine.weight=1",
        ],
    )
    assert config.flat()["objectives.pair_cosine.margin"] == 0.5
    prepared = prepare_data(config)
    recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""))
    recipe.setup()
    losses = []
    step = recipe.step
    recipe.step = lambda batches: losses.append(step(batches)) or losses[-1]
    recipe.run(local_streams(prepared, config), lambda metrics, directory: None, lambda: tmp_path)
    assert [sorted(loss) for loss in losses] == [["Train/grad_norm", "Train/loss", "Train/pair_cosine_loss"]] * 2
    assert all(0 <= loss["Train/pair_cosine_loss"] <= 2.5 for loss in losses)
    sys.modules.pop("pair_cosine")
