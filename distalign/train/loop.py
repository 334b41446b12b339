"""The function Ray Train runs on every worker: the recipe fed by this worker's datasets.

Each worker reads its own dataset of every table stream, and streams its own share of the corpus;
checkpoints are saved by every rank (DeepSpeed shards) into a temporary
directory and handed to Ray Train.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Iterator

import ray
import ray.train
import ray.train.torch
import torch

from distalign.logs import configure
from distalign.preparation.streams import corpus_batches, shard_name
from distalign.train.plan import TrainingPlan
from distalign.train.recipe import TrainingRecipe, stream_batch_sizes

log = logging.getLogger("distalign")


def endless_batches(name: str, batch_size: int) -> Iterator[dict[str, torch.Tensor]]:
    """Batches of this worker's dataset of a stream, pass after pass."""
    shard = ray.train.get_dataset_shard(name)
    while True:
        empty = True
        for batch in shard.iter_torch_batches(batch_size=batch_size, drop_last=True):
            empty = False
            yield batch
        if empty:
            raise ValueError(f"dataset '{name}' has fewer rows per worker than one batch of {batch_size}")


def report(metrics: dict[str, float], directory: Path | None) -> None:
    checkpoint = ray.train.Checkpoint.from_directory(str(directory)) if directory is not None else None
    ray.train.report(metrics, checkpoint=checkpoint)


def train_loop_per_worker(plan: TrainingPlan) -> None:
    configure()
    ctx = ray.train.get_context()
    rank, workers = ctx.get_world_rank(), ctx.get_world_size()
    log.info("worker %d of %d on node %s", rank, workers, ray.get_runtime_context().get_node_id()[:16])
    recipe = TrainingRecipe(plan, rank, workers, ray.train.torch.get_device())
    checkpoint = ray.train.get_checkpoint()
    with tempfile.TemporaryDirectory() as tmp:
        resume_dir = Path(checkpoint.to_directory(str(Path(tmp) / "resume"))) if checkpoint is not None else None
        recipe.setup(resume_dir)
    streams = {name: corpus_batches(plan.corpus, rank, workers, size) if name == "corpus"
               else endless_batches(shard_name(name, rank), size)
               for name, size in stream_batch_sizes(plan.config).items()}
    recipe.run(streams, report, tempfile.TemporaryDirectory)
