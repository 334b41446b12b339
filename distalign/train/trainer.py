"""The driver side of a training run: prepare data, open the MLflow run, run the TorchTrainer.

    run_training(load_config("jobs/configs/quickstart.yaml"))

Everything that can fail on bad input (config, files, rows) fails in ``prepare_data`` before
any Ray resources are taken. A run started again with the same ``run.name`` and storage resumes
from its last checkpoint and continues its step count and its MLflow run.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import pyarrow.fs
import ray
import ray.train
from ray.train.torch import TorchTrainer

from distalign.config import ExperimentConfig
from distalign.data.pipeline import build_datasets
from distalign.data.prepare import prepare_data
from distalign.eval.bli_task import SELECTION_METRIC, build_test_set
from distalign.ray_session import ensure_ray
from distalign.tracking import BEST_CHECKPOINT_TAG, CHECKPOINT_TAG, client_for, tracked_run
from distalign.train.loop import train_loop_per_worker


@dataclass
class TrainingOutcome:
    run_id: str
    checkpoint: str  # URI or local path of the last checkpoint ("" if none)
    metrics: dict
    best_checkpoint: str = ""  # highest eval/selection/rel_mrr_gain ("" without validation pairs)


def steps_per_epoch(config: ExperimentConfig, prepared) -> int:
    """Steps in one pass over the main training stream: the constraint pairs if an objective reads them."""
    t = config.train
    if "constraints" in config.objectives.streams():
        rows, batch = len(prepared.constraints), t.constraint_batch_size
    else:
        rows, batch = len(prepared.corpus), t.corpus_batch_size
    return max(1, rows // (t.num_workers * batch))


def eval_interval(config: ExperimentConfig, prepared) -> int:
    """Steps between evaluations: ``eval.every``, or ``eval.every_epochs`` of the main training stream."""
    if not config.eval.every_epochs:
        return config.eval.every
    return max(1, round(config.eval.every_epochs * steps_per_epoch(config, prepared)))


def resolve_epochs(config: ExperimentConfig, prepared) -> None:
    """``train.epochs`` > 0 sets ``train.max_steps`` from the prepared data (the LR schedule spans them)."""
    if config.train.epochs:
        config.train.max_steps = max(1, round(config.train.epochs * steps_per_epoch(config, prepared)))
        print(f"[distalign] train.epochs={config.train.epochs}: {config.train.max_steps} steps", flush=True)


def _uri(checkpoint: ray.train.Checkpoint) -> str:
    scheme = "" if isinstance(checkpoint.filesystem, pyarrow.fs.LocalFileSystem) else "s3://"
    return scheme + checkpoint.path


def storage_filesystem(config: ExperimentConfig) -> pyarrow.fs.FileSystem | None:
    """An explicit S3 filesystem when an endpoint is configured (MinIO, moto); else Ray's default."""
    if not config.storage.endpoint_url:
        return None
    # Credentials are read here, on the driver, and travel with the filesystem to the workers.
    return pyarrow.fs.S3FileSystem(
        endpoint_override=config.storage.endpoint_url,
        region=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        access_key=os.environ.get("AWS_ACCESS_KEY_ID"),
        secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
    )


def ray_storage_path(config: ExperimentConfig) -> str:
    # With an explicit filesystem Ray wants the path inside it (bucket/prefix), not a URI.
    path = config.storage.path
    return path.split("://", 1)[1] if config.storage.endpoint_url and "://" in path else path


def run_training(config: ExperimentConfig, callbacks: list | None = None) -> TrainingOutcome:
    prepared = prepare_data(config)
    t = config.train
    print(f"[distalign] data: {len(prepared.constraints)} constraint pairs "
          f"({prepared.excluded_constraints} excluded as evaluation words), {len(prepared.corpus)} sentences, "
          f"{prepared.malformed_rows} malformed rows skipped; model {prepared.model_path}", flush=True)
    resolve_epochs(config, prepared)
    test_sets = [build_test_set(p.lang1, p.lang2, p.src, p.tgt, config.eval.bli_max_pairs, t.seed)
                 for p in prepared.eval_pairs]
    eval_every = eval_interval(config, prepared)
    if config.eval.every_epochs:
        print(f"[distalign] evaluating and checkpointing every {eval_every} steps "
              f"({config.eval.every_epochs} epochs)", flush=True)
    # Ray keeps the best checkpoints by the selection score (and always the latest, for resuming)
    score = {"checkpoint_score_attribute": SELECTION_METRIC, "checkpoint_score_order": "max"} if test_sets else {}

    ensure_ray()
    with tracked_run(config.tracking.uri, config.tracking.experiment, config.run.name, config.storage.path,
                     config.flat(), config.to_dict(), config.tracking.parent_run_id) as run_id:
        trainer = TorchTrainer(
            train_loop_per_worker,
            train_loop_config={
                "config": config.to_dict(),
                "model_path": prepared.model_path,
                "mlflow_run_id": run_id,
                "bli_test_sets": [dataclasses.asdict(ts) for ts in test_sets],
                "eval_every": eval_every,
                "languages": prepared.languages,
                # DICT-MLM's synonyms, sense-aware translations: the training pairs (evaluation words removed)
                "dictionary": (prepared.constraints.select(["word1", "lang1", "word2", "lang2"])
                               if config.objectives.uses_dictionary else None),
            },
            scaling_config=ray.train.ScalingConfig(
                num_workers=t.num_workers, use_gpu=t.use_gpu, resources_per_worker={"CPU": t.cpus_per_worker}),
            run_config=ray.train.RunConfig(
                name=config.run.name,
                storage_path=ray_storage_path(config),
                storage_filesystem=storage_filesystem(config),
                checkpoint_config=ray.train.CheckpointConfig(num_to_keep=config.storage.keep_checkpoints, **score),
                callbacks=callbacks or [],
            ),
            datasets=build_datasets(prepared, config),
        )
        result = trainer.fit()
        checkpoint = _uri(result.checkpoint) if result.checkpoint is not None else ""
        best = result.get_best_checkpoint(SELECTION_METRIC, "max") if test_sets and result.best_checkpoints else None
        best_checkpoint = _uri(best) if best is not None else ""
        client = client_for(config.tracking.uri)
        if checkpoint:
            client.set_tag(run_id, CHECKPOINT_TAG, checkpoint)
        if best_checkpoint:
            client.set_tag(run_id, BEST_CHECKPOINT_TAG, best_checkpoint)
    return TrainingOutcome(run_id, checkpoint, dict(result.metrics or {}), best_checkpoint)
