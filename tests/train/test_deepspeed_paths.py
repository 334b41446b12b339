"""The DeepSpeed paths a GPU run takes past its first steps, on CPU (gloo): ZeRO-3 on two ranks through an in-loop
evaluation whose ranks score unequal shares of the validation rows, and the sense-aware objective past its warm-up
(the copy of sense 0 into the other senses); a bf16 run's exported weights are its fp32 master weights.

Found by reading the GPU paths (issue 45): the validation's uneven forwards hung ZeRO-3 (every forward gathers the
parameters from all ranks); the sense copy read ``weight.shape[1]`` of ZeRO-3's empty placeholder, and under
ZeRO-1/2 in bf16 the next step overwrote it from DeepSpeed's untouched fp32 master copy; bf16 runs exported bf16.
"""

from __future__ import annotations

import datetime
import os

import pytest
import torch
import torch.multiprocessing as mp
from conftest import QUICKSTART, REPO, SENSE_AWARE_SMALL, SMALL, free_port

from distalign.config import load_config
from distalign.preparation.inputs import prepare_data

pytestmark = pytest.mark.heavy
SENSE_AWARE = REPO / "jobs" / "configs" / "sense_aware_tiny.yaml"
VALIDATION_ROWS = 5  # 3 for rank 0 and 2 for rank 1: two forwards against one at batch size 2
SENSE_OVERRIDES = [
    *SMALL,
    *SENSE_AWARE_SMALL,
    "train.corpus_batch_size=2",
    "train.engine=deepspeed",
    "train.precision=bf16",
]


def sense_weights(weights: dict[str, torch.Tensor], num_senses: int) -> torch.Tensor:
    """The sense output layer's [V, S, d] vectors from an exported state dict."""
    weight = weights["objectives.sense_aware.sense_output.weight"]
    return weight.view(-1, num_senses, weight.shape[-1])


def _rank(rank: int, port: int, validation_run, sense_run, results) -> None:
    import torch.distributed as dist

    from distalign.preparation.ray_streams import local_streams
    from distalign.preparation.table_rows import store_table
    from distalign.train.recipe import TrainingRecipe
    from distalign.train.trainer import plan_training

    os.environ.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
    )
    # a short timeout: a rank left waiting fails the test in a minute instead of hanging it
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=60)
    )
    try:
        config, prepared = validation_run  # the MLM with held-out sentences, VALIDATION_ROWS of them scored
        recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""), rank, 2)
        recipe.setup()
        recipe.plan.mlm_validation = store_table(
            prepared.validation.slice(0, VALIDATION_ROWS),
            config.storage.path,
            config.storage.endpoint_url,
            config.run.name,
            "validation",
        )
        mlm_loss = recipe.evaluate()["eval/mlm/loss"]

        config, prepared = sense_run
        recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""), rank, 2)
        recipe.setup()
        streams = local_streams(prepared, config)
        num_senses = config.objectives.sense_aware.num_senses
        for _ in range(config.objectives.sense_aware.warmup_steps):  # the copy runs as warm-up ends
            recipe.step([recipe.next_batches(streams)])
        exported = recipe.engine.exported_weights()
        if rank == 0:
            senses = sense_weights(exported, num_senses)
            results[rank] = {
                "mlm_loss": mlm_loss,
                "dtypes": {v.dtype for v in exported.values() if isinstance(v, torch.Tensor)},
                "senses_equal": all(torch.equal(senses[:, s], senses[:, 0]) for s in range(num_senses)),
            }
        else:
            results[rank] = {"exported": exported}
    finally:
        dist.destroy_process_group()


def test_zero3_on_two_ranks_evaluates_uneven_shares_and_copies_senses_after_warmup(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    zero3 = ["train.engine=deepspeed", "train.zero_stage=3", "train.precision=bf16", "train.corpus_batch_size=2"]
    validation = load_config(QUICKSTART, [*SMALL, *zero3, "data.synthetic.validation_sentences=8"])
    sense = load_config(SENSE_AWARE, [*SENSE_OVERRIDES, "train.zero_stage=3"])
    runs = [(config, prepare_data(config)) for config in (validation, sense)]
    results = mp.Manager().dict()
    # spawn, not fork: a child forked after this process ran autograd can deadlock in its backward
    mp.start_processes(_rank, args=(free_port(), *runs, results), nprocs=2, start_method="spawn")
    assert results[1] == {"exported": None}  # ZeRO-3 gathers the export to rank 0 only
    chief = results[0]
    assert chief["mlm_loss"] > 0
    assert chief["dtypes"] <= {torch.float32, torch.int64}
    assert chief["senses_equal"]  # the copy reached the master weights: the step after it did not undo it


def test_a_bf16_zero2_run_copies_senses_into_the_master_weights_and_exports_fp32(tmp_path, monkeypatch, gloo_group):
    from transformers import AutoModelForMaskedLM

    from distalign.checkpoint import MODEL_DIR
    from distalign.preparation.ray_streams import local_streams
    from distalign.train.recipe import TrainingRecipe
    from distalign.train.trainer import plan_training

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(key, value)
    config = load_config(SENSE_AWARE, [*SENSE_OVERRIDES, "train.zero_stage=2"])
    prepared = prepare_data(config)
    recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""))
    recipe.setup()
    streams = local_streams(prepared, config)
    warmup, num_senses = config.objectives.sense_aware.warmup_steps, config.objectives.sense_aware.num_senses
    for _ in range(warmup + 2):  # the copy as warm-up ends, then a step that would undo it from the master copy
        recipe.step([recipe.next_batches(streams)])
        if recipe.state.step == warmup:
            senses = sense_weights(recipe.engine.exported_weights(), num_senses)
            assert all(torch.equal(senses[:, s], senses[:, 0]) for s in range(num_senses))
    module = recipe.engine.module.objectives["sense_aware"].sense_output.weight
    moved = sense_weights(recipe.engine.exported_weights(), num_senses)
    # the module's bf16 weights are the master weights rounded: the copy was not undone by the last step
    assert torch.equal(module.detach().float().view_as(moved), moved.to(torch.bfloat16).float())
    recipe.save(tmp_path / "checkpoint")
    exported = AutoModelForMaskedLM.from_pretrained(tmp_path / "checkpoint" / MODEL_DIR, dtype="auto")
    assert {p.dtype for p in exported.parameters()} == {torch.float32}
    master = recipe.engine.exported_weights()
    for name, value in exported.state_dict().items():
        assert torch.equal(value, master[f"masked_lm.{name}"]), name
