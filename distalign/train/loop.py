"""A training worker: the recipe fed by this worker's own rows of the run's streams, run by Ray Train on every worker
(``train_loop_per_worker``) or by a one-worker run in the calling process (``distalign.train.in_process``).

Each worker asks every stream it trains on for its batches (``Stream.worker_batches``): its share of each
step's rows of a table stream, its own share of the corpus. Checkpoints are saved by every rank (DeepSpeed shards)
into a local directory and uploaded in the background (``distalign.train.uploads``) by the session (Ray Train, or
the run's own checkpoint store); a resume reads each rank's own files (``distalign.train.resume``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import ray
import ray.train
import ray.train.torch
import torch

from distalign.logs import configure
from distalign.preparation.ray_streams import RayWorkerData
from distalign.tracking import WORKER_HTTP_SETTINGS
from distalign.train.checkpoint_store import CheckpointStore
from distalign.train.failures import recording_failures
from distalign.train.plan import TrainingPlan
from distalign.train.recipe import TrainingRecipe
from distalign.train.resume import resumed_from
from distalign.train.uploads import CheckpointUploads

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

    def checkpoint_directory(self) -> Path:
        """An empty local directory for the next checkpoint (once the previous one is uploaded)."""

    def report(self, metrics: dict[str, float], directory: Path | None) -> None:
        """Hand the runner the metrics and, with ``directory``, a checkpoint to upload (in the background)."""

    def wait_for_uploads(self) -> None:
        """Wait for the checkpoint upload under way; raise if one failed."""


class RayTrainWorker:
    """A worker of Ray Train's worker group."""

    def __init__(self, plan: TrainingPlan):
        ctx = ray.train.get_context()
        self.rank, self.world_size = ctx.get_world_rank(), ctx.get_world_size()
        self.node_rank, self.local_rank = ctx.get_node_rank(), ctx.get_local_rank()
        self.device = ray.train.torch.get_device()
        self.storage = plan.config.storage
        self.run_name = plan.config.run.name
        self.uploads = CheckpointUploads(self.rank, self.world_size)
        self.checkpoint_directory = self.uploads.new_directory
        self.wait_for_uploads = self.uploads.wait

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

    def report(self, metrics: dict[str, float], directory: Path | None) -> None:
        """Every rank reports (a barrier); a checkpoint is uploaded by Ray Train's upload thread (``ASYNC``) through
        ``self.uploads``, and registered once every rank's part is up."""
        if directory is None:
            ray.train.report(metrics)
            return
        storage = ray.train.get_context().get_storage()

        def upload(checkpoint: ray.train.Checkpoint, name: str) -> ray.train.Checkpoint:
            return self.uploads.upload(directory, lambda: storage.persist_current_checkpoint(checkpoint, name))

        self.uploads.begin()
        ray.train.report(
            metrics,
            checkpoint=ray.train.Checkpoint.from_directory(str(directory)),
            checkpoint_upload_mode=ray.train.CheckpointUploadMode.ASYNC,
            delete_local_checkpoint_after_upload=False,
            checkpoint_upload_fn=upload,
        )


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
        with resumed_from(session.checkpoints(), rank, session.local_rank) as directory:
            recipe.setup(directory)
        plan.clock.mark("model")
        data, train = RayWorkerData(rank, workers, plan.corpus, plan.tables), plan.config.train
        saved = recipe.stream_states or {}  # where the checkpoint's workers stood, however many they were
        streams = {
            name: stream.worker_batches(data, stream.batch_size(train), saved.get(name))
            for name, stream in plan.streams.items()
        }
        recipe.run(streams, session.report, session.checkpoint_directory)
        session.wait_for_uploads()


def train_loop_per_worker(plan: TrainingPlan) -> None:
    """What Ray Train runs on every worker."""
    run_worker(plan, RayTrainWorker(plan))
