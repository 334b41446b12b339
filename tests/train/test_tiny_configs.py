"""Every objective's tiny config as shipped, under DeepSpeed ZeRO-2 on 2 workers: it trains, logs its loss to
MLflow and checkpoints (ZeRO shards of both ranks); where the run has state beyond the model and optimizer
(adapters, objective-owned parameters, the sense state), a second start resumes from that checkpoint.
(DDP runs of the same configs are in test_objective_runs.py; the DDP resume in test_training_integration.py.)
ZeRO-3's export of the whole model is checked on the quickstart."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from conftest import QUICKSTART, REPO, SENSE_AWARE_SMALL, SMALL
from distalign.config import load_config
from distalign.checkpoint import MODEL_DIR, OBJECTIVES_FILE, STATE_FILE
from distalign.models.loading import load_masked_lm
from distalign.tracking import START_MODEL_TAG
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow


@dataclass
class TinyCase:
    objective: str  # its loss is logged as train/<objective>_loss
    shrink: list[str] = field(default_factory=list)  # what brings it down to a few steps
    resume: bool = True  # align and static have no state of their own: their resume is the quickstart's


TINY_CONFIGS = {
    "babelbert_sense_adapters_tiny.yaml": TinyCase("lexical"),
    "align_mlm_tiny.yaml": TinyCase("align", resume=False),
    "dict_mlm_tiny.yaml": TinyCase("dict_mlm", ["objectives.dict_mlm.tlm=true"]),
    "static_align_tiny.yaml": TinyCase("static", ["train.static_batch_size=16", "objectives.static.loss=dcca"],
                                       resume=False),  # DDP runs mse
    "sense_aware_tiny.yaml": TinyCase("sense_aware", SENSE_AWARE_SMALL),
}


def sense_state(checkpoint: str) -> dict:
    return torch.load(Path(checkpoint) / OBJECTIVES_FILE, weights_only=True)["sense_aware._extra_state"]


@pytest.mark.parametrize("name", sorted(TINY_CONFIGS))
def test_tiny_config_under_zero2_checkpoints_and_resumes(name, ray_local, distalign_home):
    case = TINY_CONFIGS[name]
    path = REPO / "jobs" / "configs" / name
    overrides = SMALL + case.shrink + ["train.engine=deepspeed", "train.zero_stage=2", f"run.name={path.stem}-zero2"]
    first = run_training(load_config(path, overrides + (["train.max_steps=4"] if case.resume else [])))
    shards = [p.name for p in (Path(first.checkpoint) / "deepspeed" / "state").iterdir()]
    assert any("zero_pp_rank_0" in s for s in shards) and any("zero_pp_rank_1" in s for s in shards)
    # read now: the resumed run may delete this checkpoint (Ray keeps the best by selection score + the latest)
    first_sense = sense_state(first.checkpoint) if case.objective == "sense_aware" else None

    config = load_config(path, overrides)  # max_steps 6: the same run name resumes at step 4
    last = run_training(config) if case.resume else first
    client = MlflowClient(config.tracking.uri)
    assert last.run_id == first.run_id and client.get_run(last.run_id).info.status == "FINISHED"
    assert sorted(m.step for m in client.get_metric_history(last.run_id, f"train/{case.objective}_loss")) == [2, 4, 6]
    assert json.loads((Path(last.checkpoint) / STATE_FILE).read_text())["step"] == 6
    if first_sense is not None:
        # the sense state (centres, projection, step) is training state: restored on resume, so it counts on
        last_sense = sense_state(last.checkpoint)
        assert (int(first_sense["step"]), int(last_sense["step"])) == (4, 6)
        assert int(last_sense["fitted"]) == 1 and last_sense["proj"].abs().sum() > 0  # fitted after warm-up


def test_zero3_exports_the_whole_model_gathered_to_rank_0_and_resumes(ray_local, distalign_home):
    """ZeRO-3 partitions every parameter; the checkpoint's model directory is the whole trained model (DeepSpeed's
    16-bit gather to rank 0), loadable as a plain Hugging Face model, and the run resumes from its shards."""
    overrides = SMALL + ["train.engine=deepspeed", "train.zero_stage=3", "run.name=quickstart-zero3"]
    first = run_training(load_config(QUICKSTART, overrides + ["train.max_steps=4"]))
    exported = load_masked_lm(str(Path(first.checkpoint) / MODEL_DIR))
    start = load_masked_lm(MlflowClient(load_config(QUICKSTART).tracking.uri).get_run(first.run_id).data.tags[START_MODEL_TAG])
    trained, initial = exported.state_dict(), start.state_dict()
    assert trained.keys() == initial.keys()
    assert all(trained[k].shape == initial[k].shape and torch.isfinite(trained[k]).all() for k in trained)
    moved = [k for k in trained if not torch.equal(trained[k], initial[k])]
    assert any("encoder.layer.0.attention" in k for k in moved)  # trained weights, not placeholders
    again = run_training(load_config(QUICKSTART, overrides))  # max_steps 6: resumes at step 4
    assert again.run_id == first.run_id
    assert json.loads((Path(again.checkpoint) / STATE_FILE).read_text())["step"] == 6
