"""The function Ray Train runs on every worker: the recipe fed by this worker's datasets.

Each worker asks every stream it trains on for its batches (``Stream.worker_batches``): its own
dataset of a table stream, its own share of the corpus. Checkpoints are saved by every rank
(DeepSpeed shards) into a temporary directory and handed to Ray Train.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

import ray
import ray.train
import ray.train.torch

from distalign.checkpoint import incomplete_files
from distalign.logs import configure
from distalign.preparation.streams import RayWorkerData
from distalign.storage import checkpoint_uri
from distalign.tracking import WORKER_HTTP_SETTINGS
from distalign.train.plan import TrainingPlan
from distalign.train.recipe import TrainingRecipe

log = logging.getLogger("distalign")


def report(metrics: dict[str, float], directory: Path | None) -> None:
    checkpoint = ray.train.Checkpoint.from_directory(str(directory)) if directory is not None else None
    ray.train.report(metrics, checkpoint=checkpoint)


def resume_directory(root: Path, is_chief: bool) -> Path | None:
    """The newest complete checkpoint of this run (Ray Train's latest, else the ones reported before it),
    downloaded under ``root``; None for a fresh start. A checkpoint cut short while it was being written
    (a lost node, a killed upload, files deleted) is skipped with a warning."""
    latest = ray.train.get_checkpoint()
    if latest is None:
        return None

    def newest_first():
        yield latest
        # asked for only once the latest proves incomplete
        committed = ray.train.CheckpointConsistencyMode.COMMITTED
        reported = ray.train.get_all_reported_checkpoints(consistency_mode=committed)
        older = [r for r in reported if r.checkpoint.path != latest.path]
        yield from (r.checkpoint for r in sorted(older, key=lambda r: r.metrics.get("step", 0), reverse=True))

    for index, checkpoint in enumerate(newest_first()):
        directory = Path(checkpoint.to_directory(str(root / f"resume{index}")))
        missing = incomplete_files(directory)
        if not missing:
            return directory
        if is_chief:
            log.warning("checkpoint %s is incomplete (missing %s): resuming from the one before it",
                        checkpoint_uri(checkpoint),
                        ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
        shutil.rmtree(directory)
    raise RuntimeError(f"no complete checkpoint to resume from beside {checkpoint_uri(latest)}")


def train_loop_per_worker(plan: TrainingPlan) -> None:
    plan.clock.mark("workers")
    configure()
    for key, value in WORKER_HTTP_SETTINGS.items():
        os.environ.setdefault(key, value)
    ctx = ray.train.get_context()
    rank, workers = ctx.get_world_rank(), ctx.get_world_size()
    log.info("worker %d of %d on node %s", rank, workers, ray.get_runtime_context().get_node_id()[:16])
    # one rank per node samples the node's system metrics
    node = f"node{ctx.get_node_rank()}" if ctx.get_local_rank() == 0 else ""
    recipe = TrainingRecipe(plan, rank, workers, ray.train.torch.get_device(), system_metrics_node=node)
    with tempfile.TemporaryDirectory() as tmp:
        recipe.setup(resume_directory(Path(tmp), rank == 0))
    plan.clock.mark("model")
    data, train = RayWorkerData(rank, workers, plan.corpus), plan.config.train
    saved = recipe.stream_states or {}  # where the checkpoint's workers stood, however many they were
    streams = {name: stream.worker_batches(data, stream.batch_size(train), saved.get(name))
               for name, stream in plan.streams.items()}
    recipe.run(streams, report, tempfile.TemporaryDirectory)
