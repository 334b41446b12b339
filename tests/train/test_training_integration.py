"""End to end on a real local Ray cluster: 2 workers, DDP and DeepSpeed ZeRO-2, MLflow in sqlite.

The DDP run checkpoints to S3 (moto's server on loopback) and is resumed from there on one worker (an
elastic resume: the corpus epoch goes on with no row trained twice and none skipped); the DeepSpeed run
checkpoints to a local directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import QUICKSTART, SMALL
from mlflow.tracking import MlflowClient
from transformers import AutoModelForMaskedLM

from distalign.checkpoint import read_stream_states
from distalign.config import load_config
from distalign.data.corpus_plan import Position, grouped
from distalign.metric_names import TRAINING, family_of
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import corpus_feed, item_blocks, local_streams
from distalign.preparation.staging import stage_inputs
from distalign.tracking import BEST_CHECKPOINT_TAG, CHECKPOINT_TAG
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow
PERF_KEYS = (
    "perf/step_ms",
    "perf/data_wait_ms",
    "perf/forward_backward_ms",
    "perf/optimizer_ms",
    "perf/tokens_per_s",
    "perf/tokens_per_s_per_worker",
    "perf/sequences_per_s",
    "perf/sequences_per_s_per_worker",
    "perf/padding_share",
)


def steps(client: MlflowClient, run_id: str, key: str) -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def value_at(client: MlflowClient, run_id: str, key: str, step: int) -> float:
    """The value first logged at ``step`` (a resume from an earlier checkpoint logs some steps again)."""
    return min((m for m in client.get_metric_history(run_id, key) if m.step == step), key=lambda m: m.timestamp).value


@pytest.fixture(scope="module")
def s3_storage(s3_endpoint):
    url, s3 = s3_endpoint
    return ["storage.path=s3://ckpt/runs", f"storage.endpoint_url={url}"], s3


def read_s3_checkpoint(s3, uri: str, destination: Path) -> Path:
    """Download a checkpoint directory from the test bucket."""
    prefix = uri.removeprefix("s3://ckpt/")
    for item in s3.list_objects_v2(Bucket="ckpt", Prefix=prefix)["Contents"]:
        if item["Key"].endswith("/"):
            continue  # directory marker objects
        target = destination / item["Key"].removeprefix(prefix).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file("ckpt", item["Key"], str(target))
    return destination


@pytest.fixture(scope="module")
def ddp_run(ray_local, distalign_home, s3_storage):
    # a mixed run: MLM + lexical InfoNCE + ALIGN-MLM, each loss logged on its own
    config = load_config(QUICKSTART, SMALL + ["run.name=ddp", "objectives.align.weight=2"] + s3_storage[0])
    return config, run_training(config)


def test_ddp_run_logs_metrics_and_checkpoints_to_s3(ddp_run, s3_storage, tmp_path):
    config, outcome = ddp_run
    client = MlflowClient(config.tracking.uri)
    run = client.get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["train.engine"] == "ddp"
    assert run.data.params["objectives.lexical.temperature"] == "0.07"
    assert run.data.tags[CHECKPOINT_TAG] == outcome.checkpoint
    assert steps(client, outcome.run_id, "Train/loss") == [2, 4, 6]
    assert steps(client, outcome.run_id, "Train/mlm_loss") == [2, 4, 6]
    assert steps(client, outcome.run_id, "Train/lexical_loss") == [2, 4, 6]
    assert steps(client, outcome.run_id, "Train/align_loss") == [2, 4, 6]
    assert -1 <= value_at(client, outcome.run_id, "Train/align_loss", 6) <= 1  # -mean cosine
    # where the steps' time goes (distalign.train.step_timing), at train.log_every, with DDP's all-reduce
    for phase in PERF_KEYS + ("perf/allreduce_ms", "perf/allreduce_exposed_ms"):
        assert steps(client, outcome.run_id, phase) == [2, 4, 6], phase
    assert value_at(client, outcome.run_id, "perf/tokens_per_s", 6) == pytest.approx(
        2 * value_at(client, outcome.run_id, "perf/tokens_per_s_per_worker", 6)
    )  # 2 workers
    assert steps(client, outcome.run_id, "eval/bli/avg/mrr") == [0, 3, 6]
    assert steps(client, outcome.run_id, "eval/bli/xa-xb/mrr") == [0, 3, 6]
    # model selection: relative MRR gain over the vanilla model (0 at step 0), best checkpoint tagged
    assert value_at(client, outcome.run_id, "eval/selection/rel_mrr_gain", 0) == 0.0
    gains = {step: value_at(client, outcome.run_id, "eval/selection/rel_mrr_gain", step) for step in (3, 6)}
    assert run.data.tags[BEST_CHECKPOINT_TAG] == outcome.best_checkpoint
    best_state = read_s3_checkpoint(s3_storage[1], outcome.best_checkpoint, tmp_path / "best") / "trainer_state.json"
    assert json.loads(best_state.read_text())["step"] in {k for k, gain in gains.items() if gain == max(gains.values())}
    # the total is the weighted sum of the objectives (weights 1, 1, 2)
    total = value_at(client, outcome.run_id, "Train/loss", 6)
    weights = {"mlm": 1.0, "lexical": 1.0, "align": 2.0}
    parts = sum(w * value_at(client, outcome.run_id, f"Train/{o}_loss", 6) for o, w in weights.items())
    assert total == pytest.approx(parts, rel=1e-5)

    assert outcome.checkpoint.startswith("s3://ckpt/runs/ddp/checkpoint_")
    checkpoint = read_s3_checkpoint(s3_storage[1], outcome.checkpoint, tmp_path)
    assert json.loads((checkpoint / "trainer_state.json").read_text())["step"] == 6
    assert (checkpoint / "optimizer.pt").is_file()
    model = AutoModelForMaskedLM.from_pretrained(checkpoint / "model")
    assert model.config.hidden_size == config.model.tiny.hidden_size
    assert "config.yaml" in [a.path for a in client.list_artifacts(outcome.run_id)]


def test_every_metric_the_run_logs_is_in_the_registry(ddp_run):
    """The reference page of metric names (distalign.metric_names) covers what a real run logs."""
    config, outcome = ddp_run
    logged = MlflowClient(config.tracking.uri).get_run(outcome.run_id).data.metrics
    assert {"Train/loss", "perf/step_ms", "startup/total_s", "eval/bli/avg/mrr"} <= set(logged)
    unregistered = sorted(name for name in logged if family_of(name, (TRAINING,)) is None)
    assert not unregistered, f"add these to distalign/metric_names.py: {unregistered}"


def take(stream, count):
    return [next(stream) for _ in range(count)]


def this_epoch(state: dict) -> list:
    """A corpus stream state's items of epoch 0."""
    return [item for item in Position.from_json(state).items if item.epoch == 0]


def test_rerun_on_one_worker_resumes_from_s3_past_a_cut_short_checkpoint(ddp_run, s3_storage, tmp_path, capfd):
    """The last checkpoint (step 6) lost its weights as if its upload had been cut short: the rerun, on one worker
    instead of two, warns, resumes from step 3 in the same MLflow run and continues the step count, and the
    corpus epoch with it: the corpus rows the two runs trained and those the epoch has left are every row once."""
    config, first = ddp_run
    s3 = s3_storage[1]
    s3.delete_object(Bucket="ckpt", Key=f"{first.checkpoint.removeprefix('s3://ckpt/')}/model/model.safetensors")
    resumed_config = load_config(
        QUICKSTART, SMALL + ["run.name=ddp", "train.max_steps=10", "train.num_workers=1"] + s3_storage[0]
    )
    second = run_training(resumed_config)
    output = capfd.readouterr()
    log = output.out + output.err
    assert f"checkpoint {first.checkpoint} is incomplete or corrupted (model/model.safetensors)" in log
    assert "resuming at step 3/10" in log
    client = MlflowClient(config.tracking.uri)
    assert second.run_id == first.run_id  # same MLflow run, continued
    assert client.get_run(second.run_id).info.status == "FINISHED"
    assert steps(client, second.run_id, "Train/loss") == [2, 4, 4, 6, 6, 8, 10]
    assert steps(client, second.run_id, "eval/bli/avg/mrr") == [0, 3, 3, 6, 6, 9, 10]  # a resume re-evaluates
    # model selection after the resume still compares with the vanilla model (step 0), not the resume point
    pairs = ["xa-xb", "xa-xc", "xb-xc"]
    vanilla = {p: value_at(client, second.run_id, f"eval/bli/{p}/mrr", 0) for p in pairs}
    gain = sum(value_at(client, second.run_id, f"eval/bli/{p}/mrr", 10) / vanilla[p] - 1 for p in pairs) / len(pairs)
    assert value_at(client, second.run_id, "eval/selection/rel_mrr_gain", 10) == pytest.approx(gain, rel=1e-6)
    checkpoint = read_s3_checkpoint(s3, second.checkpoint, tmp_path)
    assert json.loads((checkpoint / "trainer_state.json").read_text())["step"] == 10
    assert second.checkpoint != first.checkpoint

    # The same batches in this process, from the staged corpus on S3: 3 per worker of the first run, 7 on the one
    # worker after the resume. The cluster's workers ended where these did, so they trained these rows.
    prepared = stage_inputs(prepare_data(resumed_config), resumed_config)
    old = [local_streams(prepared, config, rank=rank, workers=2)["corpus"] for rank in range(2)]
    trained = [int(row) for stream in old for batch in take(stream, 3) for row in batch["row"]]
    resumed = local_streams(prepared, resumed_config, {"corpus": [stream.state() for stream in old]})["corpus"]
    trained += [int(row) for batch in take(resumed, 7) for row in batch["row"]]
    (final,) = read_stream_states(checkpoint)["corpus"]
    # the worker reads items ahead, into the next epoch (whose dealt items its state keeps): this epoch's agree
    assert this_epoch(final) == this_epoch(resumed.state()) != []
    feed = corpus_feed(prepared, resumed_config)
    left = [
        int(row)
        for item in Position.from_json(final).items
        if item.epoch == 0
        for block in item_blocks(item, 0, feed.corpus, feed.job)
        for row in block["row"]
    ]
    # the epoch's sequences (packed: each by its first sentence's row), whichever items their units are read in
    epoch = [
        int(row)
        for item in grouped(feed.corpus.units(), 0, feed.mix_units)
        for block in item_blocks(item, 0, feed.corpus, feed.job)
        for row in block["row"]
    ]
    assert len(trained) == 2 * 3 * 8 + 7 * 8 and sorted(trained + left) == sorted(epoch)


def test_deepspeed_zero2_trains_like_ddp_and_selects_by_mlm_validation_loss(ddp_run, tmp_path):
    """The DDP run's objective mix under ZeRO-2, with held-out sentences scored at every evaluation and the
    best checkpoint chosen by their MLM loss (the static-contextual authors' selection); held-out sentences
    change neither the training data nor the trajectory."""
    config, ddp = ddp_run
    ds_config = load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=zero2",
            "train.engine=deepspeed",
            "train.zero_stage=2",
            "objectives.align.weight=2",
            "data.synthetic.validation_sentences=40",
            "eval.select_by=mlm_loss",
            "storage.keep_checkpoints=1",
        ],
    )
    outcome = run_training(ds_config)
    client = MlflowClient(config.tracking.uri)
    run = client.get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    assert steps(client, outcome.run_id, "Train/loss") == [2, 4, 6]
    for phase in PERF_KEYS:
        assert steps(client, outcome.run_id, phase) == [2, 4, 6], phase
    assert not steps(client, outcome.run_id, "perf/allreduce_ms")  # DeepSpeed's collectives: not separable
    # Same seed, data order and fp32 maths: ZeRO-2 must follow DDP's trajectory.
    for step in (2, 4, 6):
        assert value_at(client, outcome.run_id, "Train/loss", step) == pytest.approx(
            value_at(client, ddp.run_id, "Train/loss", step), rel=1e-3
        )
    assert steps(client, outcome.run_id, "eval/mlm/loss") == [0, 3, 6]
    assert steps(client, outcome.run_id, "eval/mlm/xb/loss") == [0, 3, 6]
    losses = {step: value_at(client, outcome.run_id, "eval/mlm/loss", step) for step in (3, 6)}
    best_step = json.loads((Path(outcome.best_checkpoint) / "trainer_state.json").read_text())["step"]
    assert losses[best_step] == min(losses.values())
    assert run.data.tags[BEST_CHECKPOINT_TAG] == outcome.best_checkpoint
    shards = [p.name for p in (Path(outcome.checkpoint) / "deepspeed" / "state").iterdir()]
    assert any("zero_pp_rank_0" in s for s in shards) and any("zero_pp_rank_1" in s for s in shards)
    assert (Path(outcome.checkpoint) / "model" / "config.json").is_file()
