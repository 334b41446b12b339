"""Every objective's tiny config as shipped, under DeepSpeed ZeRO-2 on 2 workers: it trains, logs its
loss to MLflow, checkpoints (ZeRO shards of both ranks), and a second start resumes from that checkpoint.
(DDP runs of the same objectives are in test_objective_runs.py and test_training_integration.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import REPO, SMALL
from distalign.config import load_config
from distalign.train.checkpoint import STATE_FILE
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow

# tiny config -> its objective's loss, and what shrinks it to a few steps
TINY_CONFIGS = {
    "babelbert_sense_adapters_tiny.yaml": ("lexical", []),
    "align_mlm_tiny.yaml": ("align", []),
    "dict_mlm_tiny.yaml": ("dict_mlm", ["objectives.dict_mlm.tlm=true"]),
    "static_align_tiny.yaml": ("static", ["train.static_batch_size=16", "objectives.static.loss=dcca"]),  # DDP: mse
    "sense_aware_tiny.yaml": ("sense_aware", ["objectives.sense_aware.warmup_steps=2",
                                              "objectives.sense_aware.refit_every=2",
                                              "objectives.sense_aware.queue_size=64"]),
}


@pytest.mark.parametrize("name", sorted(TINY_CONFIGS))
def test_tiny_config_under_zero2_checkpoints_and_resumes(name, ray_local, distalign_home):
    objective, shrink = TINY_CONFIGS[name]
    path = REPO / "jobs" / "configs" / name
    overrides = SMALL + shrink + ["train.engine=deepspeed", "train.zero_stage=2", f"run.name={path.stem}-zero2"]
    first = run_training(load_config(path, overrides + ["train.max_steps=4"]))
    shards = [p.name for p in (Path(first.checkpoint) / "deepspeed" / "state").iterdir()]
    assert any("zero_pp_rank_0" in s for s in shards) and any("zero_pp_rank_1" in s for s in shards)

    config = load_config(path, overrides)  # max_steps 6: the same run name resumes at step 4
    second = run_training(config)
    client = MlflowClient(config.tracking.uri)
    assert second.run_id == first.run_id and client.get_run(second.run_id).info.status == "FINISHED"
    assert sorted(m.step for m in client.get_metric_history(second.run_id, f"train/{objective}_loss")) == [2, 4, 6]
    assert json.loads((Path(second.checkpoint) / STATE_FILE).read_text())["step"] == 6
