"""A one-worker run in the calling process: what a worker group of one does, without starting one.

A Tune trial trains this way when it has one worker (``train.trial_in_process``): starting a Ray Train worker
group cost about two thirds of a short trial here (docs/benchmarks.md, "Per Tune trial"), and with Tune's
``reuse_actors`` the next trial starts in a process that has torch, transformers and the tokenizer loaded already.

The worker (``distalign.train.loop.run_worker``) runs here in a process group of one (gloo; NCCL on a GPU), fed
by the run's table and corpus tasks as a Ray Train worker is. Its checkpoints go to the run's own
``CheckpointStore`` (Ray Train's layout and retention), and each report also goes to ``forward`` (the trial's
``ray.tune.report``). There are no worker restarts: a failure fails the trial, Tune restarts it (the study's
``max_failures``) and the run resumes from its store.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import ray.train
import torch
import torch.distributed as dist

from distalign.ray_session import reserved
from distalign.train.checkpoint_store import CheckpointStore
from distalign.train.loop import run_worker
from distalign.train.plan import TrainingPlan
from distalign.train.uploads import CheckpointUploads


def open_process_group_of_one(device: torch.device) -> None:
    """Open the default process group with this process alone (the engines need one), unless one is open. It
    stays open for the process's next run: a reused trial process's DeepSpeed keeps the group in its module
    state, and a group destroyed under it fails the next trial."""
    if dist.is_initialized():
        return
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):  # DeepSpeed reads them
        os.environ.setdefault(key, value)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", store=dist.HashStore(), rank=0, world_size=1)


@dataclass(kw_only=True)
class InProcessWorker:
    """The ``WorkerSession`` of the only worker, in this process."""

    store: CheckpointStore
    device: torch.device
    forward: Callable[[dict[str, float]], None]
    rank: int = 0
    world_size: int = 1
    node_rank: int = 0
    local_rank: int = 0
    metrics: dict[str, float] = field(default_factory=dict)  # the last report's
    uploads: CheckpointUploads = field(default_factory=lambda: CheckpointUploads(0, 1))

    def checkpoints(self) -> Iterator[ray.train.Checkpoint]:
        return iter(self.store.newest_first())

    def checkpoint_directory(self) -> Path:
        return self.uploads.new_directory()

    def report(self, metrics: dict[str, float], directory: Path | None) -> None:
        if directory is not None:  # into the store in the background: the store is read once uploads are waited for
            self.uploads.start(directory, lambda: self.store.save(directory, metrics))
        self.metrics = metrics
        self.forward(metrics)

    def wait_for_uploads(self) -> None:
        self.uploads.wait()


def fit_in_process(
    plan: TrainingPlan, score: str, order: str, forward: Callable[[dict[str, float]], None]
) -> InProcessWorker:
    """Train ``plan`` on one worker in this process; returns the worker, its store holding the run's checkpoints
    (``score``: the selection metric the best is kept by, "" for none)."""
    config = plan.config
    device = torch.device("cuda", 0) if config.train.use_gpu else torch.device("cpu")
    store = CheckpointStore(
        config.storage.path, config.storage.endpoint_url, config.run.name, config.storage.keep_checkpoints, score, order
    )
    worker = InProcessWorker(store=store, device=device, forward=forward)
    open_process_group_of_one(device)
    # the worker's CPUs, held from here on as a worker group's are (the trial holds its GPU from the start: Ray
    # makes a GPU visible to the process holding it)
    cpus = config.train.cpus_per_worker
    with reserved([{"CPU": cpus}], f"train.cpus_per_worker={cpus} CPUs for the trial's worker"):
        try:
            run_worker(plan, worker)
        finally:  # a failed run's last checkpoint, written already, is still stored
            worker.uploads.wait()
    return worker
