"""A training worker: the recipe fed by this worker's own rows of the run's streams, run by Ray Train on every worker
(``train_loop_per_worker``) or by a one-worker run in the calling process (``distalign.train.in_process``).

Each worker asks every stream it trains on for its batches (``Stream.worker_batches``): its share of each
step's rows of a table stream, its own share of the corpus. Checkpoints are saved by every rank
(DeepSpeed shards) into a temporary directory and handed to the session (Ray Train, or the run's own checkpoint store).
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

import ray
import ray.train
import ray.train.torch
import torch

from distalign.checkpoint import incomplete_files
from distalign.logs import configure
from distalign.preparation.streams import RayWorkerData
from distalign.storage import checkpoint_uri
from distalign.tracking import WORKER_HTTP_SETTINGS
from distalign.train.checkpoint_store import CheckpointStore
from distalign.train.failures import recording_failures
from distalign.train.plan import TrainingPlan
from distalign.train.recipe import TrainingRecipe

log = logging.getLogger("distalign")


class WorkerSession(Protocol):
    """What a training worker needs from whoever runs it: who it is, its run's checkpoints,
    where its reports go. A Ray Train worker's (``RayTrainWorker``), or a one-worker run's in the calling
    process (``distalign.train.in_process``)."""

    rank: int
    world_size: int
    node_rank: int
    local_rank: int
    device: torch.device

    def checkpoints(self) -> Iterator[ray.train.Checkpoint]:
        """The run's checkpoints, newest first (read lazily: a resume stops at the first complete one)."""

    def report(self, metrics: dict[str, float], directory: Path | None) -> None: ...


class RayTrainWorker:
    """A worker of Ray Train's worker group."""

    def __init__(self, plan: TrainingPlan):
        ctx = ray.train.get_context()
        self.rank, self.world_size = ctx.get_world_rank(), ctx.get_world_size()
        self.node_rank, self.local_rank = ctx.get_node_rank(), ctx.get_local_rank()
        self.device = ray.train.torch.get_device()
        self.storage = plan.config.storage
        self.run_name = plan.config.run.name

    def checkpoints(self) -> Iterator[ray.train.Checkpoint]:
        latest = ray.train.get_checkpoint()
        if latest is None:  # none Ray Train knows of: the ones a run in a Tune trial's process kept, if any
            yield from CheckpointStore(self.storage.path, self.storage.endpoint_url, self.run_name, 0).newest_first()
            return
        yield latest
        # asked for only once the latest proves incomplete
        committed = ray.train.CheckpointConsistencyMode.COMMITTED
        reported = ray.train.get_all_reported_checkpoints(consistency_mode=committed)
        older = [r for r in reported if r.checkpoint.path != latest.path]
        yield from (r.checkpoint for r in sorted(older, key=lambda r: r.metrics.get("step", 0), reverse=True))

    @staticmethod
    def report(metrics: dict[str, float], directory: Path | None) -> None:
        checkpoint = ray.train.Checkpoint.from_directory(str(directory)) if directory is not None else None
        ray.train.report(metrics, checkpoint=checkpoint)


def resume_directory(checkpoints: Iterable[ray.train.Checkpoint], root: Path, is_chief: bool) -> Path | None:
    """The newest complete one of a run's ``checkpoints`` (newest first), downloaded under ``root``; None for a
    fresh start. A checkpoint cut short while it was being written (a lost node, a killed upload, files deleted)
    is skipped with a warning."""
    newest = None
    for index, checkpoint in enumerate(checkpoints):
        newest = newest or checkpoint
        directory = Path(checkpoint.to_directory(str(root / f"resume{index}")))
        missing = incomplete_files(directory)
        if not missing:
            return directory
        if is_chief:
            log.warning("checkpoint %s is incomplete (missing %s): resuming from the one before it",
                        checkpoint_uri(checkpoint),
                        ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
        shutil.rmtree(directory)
    if newest is not None:
        raise RuntimeError(f"no complete checkpoint to resume from beside {checkpoint_uri(newest)}")
    return None


def run_worker(plan: TrainingPlan, session: WorkerSession) -> None:
    """One worker's part of the run: set up or resume the recipe, then train it on this worker's streams."""
    plan.clock.mark("workers")
    configure()
    for key, value in WORKER_HTTP_SETTINGS.items():
        os.environ.setdefault(key, value)
    rank, workers = session.rank, session.world_size
    log.info("worker %d of %d on node %s", rank, workers, ray.get_runtime_context().get_node_id()[:16])
    # one rank per node samples the node's system metrics
    node = f"node{session.node_rank}" if session.local_rank == 0 else ""
    recipe = TrainingRecipe(plan, rank, workers, session.device, system_metrics_node=node)
    # an error of the training code is marked with the steps done: Ray Train's controller stops restarting a
    # worker group that fails again the same way (distalign.train.failures)
    with recording_failures(lambda: recipe.state.step):
        with tempfile.TemporaryDirectory() as tmp:
            recipe.setup(resume_directory(session.checkpoints(), Path(tmp), rank == 0))
        plan.clock.mark("model")
        data, train = RayWorkerData(rank, workers, plan.corpus, plan.tables), plan.config.train
        saved = recipe.stream_states or {}  # where the checkpoint's workers stood, however many they were
        streams = {name: stream.worker_batches(data, stream.batch_size(train), saved.get(name))
                   for name, stream in plan.streams.items()}
        recipe.run(streams, session.report, tempfile.TemporaryDirectory)


def train_loop_per_worker(plan: TrainingPlan) -> None:
    """What Ray Train runs on every worker."""
    run_worker(plan, RayTrainWorker(plan))
