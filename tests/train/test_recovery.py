"""Automatic recovery: a training worker killed by PID mid-run is replaced by Ray Train (``train.max_failures``);
the run finishes by itself from its last checkpoint, at the same data position, random state and optimizer state
(LAMB's, saved by DDP in optimizer.pt), so every logged loss matches the uninterrupted run's."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest
import ray.train
import torch
from conftest import QUICKSTART, SMALL
from mlflow.tracking import MlflowClient

from distalign.checkpoint import OPTIMIZER_FILE
from distalign.config import load_config
from distalign.data.corpus_plan import fresh_items
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import LocalWorkerData, corpus_feed
from distalign.tracking import RUN_NAME_TAG
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow


def losses_by_step(client: MlflowClient, run_id: str) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for metric in client.get_metric_history(run_id, "Train/loss"):
        out.setdefault(metric.step, []).append(metric.value)
    return out


def own_processes(word: str) -> list[psutil.Process]:
    """This process's descendants with ``word`` in their command line: its own Ray cluster's (the raylet is its
    child), never another cluster's on the same machine."""
    found = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # gone since it was listed
            if any(word in part for part in child.cmdline()):
                found.append(child)
    return found


def kill_a_worker_once_past(
    client: MlflowClient,
    experiment: str,
    run_name: str,
    step: int,
    killed: list[int],
    deadline_s: float = 300,
    process: str = "RayTrainWorker",
    settle_s: float = 2.5,
) -> None:
    """Wait for the run to log ``step`` and for Ray Train to register the checkpoints before it (its
    controller polls the workers every 2 s: ``settle_s``), then SIGKILL one training worker process (``process``:
    a word of its command line) of this process's own Ray cluster."""
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        exp = client.get_experiment_by_name(experiment)
        runs = client.search_runs([exp.experiment_id], f"tags.`{RUN_NAME_TAG}` = '{run_name}'") if exp else []
        if runs and max(losses_by_step(client, runs[0].info.run_id), default=0) >= step:
            time.sleep(settle_s)
            workers = own_processes(process)
            if workers:
                os.kill(workers[-1].pid, signal.SIGKILL)
                killed.append(workers[-1].pid)
                return
        time.sleep(0.3)


def test_a_killed_worker_is_replaced_and_the_losses_match_the_uninterrupted_run(ray_local, distalign_home):
    # with LAMB, the optimizer of DICT-MLM's published setting (dict_mlm.yaml): its state is restored too; packed
    # sequences (the default), whose epoch here is ~11 steps: the next epoch's items are read ahead, so the kill,
    # 2.5 s after step 10, lands among steps, not in a pause at epoch 1's first item
    base = SMALL + [
        "train.max_steps=40",
        "train.checkpoint_every=5",
        "train.log_every=1",
        "eval.every=0",
        "train.max_failures=2",
        "train.optimizer=lamb",
    ]
    # the reference checkpoints at its end only (~1.8 s a checkpoint here, 2026-11-26): saving one changes no loss
    clean_config = load_config(QUICKSTART, base + ["run.name=uninterrupted", "train.checkpoint_every=40"])
    clean = run_training(clean_config)
    client = MlflowClient(clean_config.tracking.uri)

    killed: list[int] = []
    killer = threading.Thread(
        target=kill_a_worker_once_past,
        args=(client, clean_config.tracking.experiment, "killed", 10, killed),
        daemon=True,
    )
    killer.start()
    outcome = run_training(load_config(QUICKSTART, base + ["run.name=killed"]))
    killer.join(timeout=5)

    assert killed, "no worker was killed"
    assert outcome.metrics["step"] == 40
    expected, got = losses_by_step(client, clean.run_id), losses_by_step(client, outcome.run_id)
    assert sorted(got) == sorted(expected) == list(range(1, 41))
    # the steps after the last registered checkpoint ran twice, before the kill and after the recovery (with the
    # same losses); the recovery started from a checkpoint, not from the beginning
    repeated = [step for step, values in got.items() if len(values) > 1]
    assert repeated and min(repeated) > 5 and len(got[1]) == 1  # restarted from a checkpoint (step 5 or later)
    for step, values in got.items():
        for value in values:
            assert abs(value - expected[step][0]) < 1e-4, (step, value, expected[step][0])
    optimizer = torch.load(Path(outcome.checkpoint) / OPTIMIZER_FILE, weights_only=True)["optimizer"]
    groups = optimizer["param_groups"]  # LAMB's settings; biases and LayerNorm weights without decay or trust ratio
    assert set(groups[0]) - {"params", "initial_lr"} == {"lr", "betas", "eps", "weight_decay", "adapt"}
    assert [(g["weight_decay"], g["adapt"]) for g in groups] == [(clean_config.train.weight_decay, True), (0.0, False)]
    assert optimizer["state"] and all(s["step"] == 40 for s in optimizer["state"].values())  # LAMB's, not AdamW's


def trained_rows(trace_dir, stream: str) -> list[tuple[int, int, int]]:
    """(workers, epoch, row) of every row of ``stream`` a run's optimizer steps kept (``train.trace_rows``): the
    size of the worker group that trained it, its epoch and row. A worker group that starts from a checkpoint at
    step s trains the steps after s again: the lines an earlier group wrote for them are dropped."""
    lines = [json.loads(line) for path in trace_dir.iterdir() for line in path.read_text().splitlines()]
    first_step: dict[str, int] = {}
    for line in lines:
        first_step[line["group"]] = min(first_step.get(line["group"], line["step"]), line["step"])
    return [
        (line["workers"], epoch, row)
        for line in lines
        if not any(later > line["group"] and start <= line["step"] for later, start in first_step.items())
        for epoch, row in zip(line["streams"][stream]["epoch"], line["streams"][stream]["row"])
    ]


def epoch_rows(config) -> list[int]:
    """The rows of one corpus epoch, read by one worker without Ray."""
    feed = corpus_feed(prepare_data(config), config)
    items = fresh_items(feed.corpus.units(), feed.seed, 0, 1, 0, feed.mix_units)
    return [row for block in LocalWorkerData({}, feed).corpus_items(items) for row in block["row"].tolist()]


def test_a_run_stopped_on_4_workers_resumes_on_2_and_trains_each_row_once(ray_local, distalign_home, tmp_path):
    """Each corpus row of the epoch, and each position of the constraint stream's draws (table rows by global
    position: ``distalign.preparation.table_rows``), trained once across the change of W."""
    trace = tmp_path / "rows"
    # 4 + 4 corpus reservations of 0.2 CPU fit the suite's 2-CPU cluster, the constraint batches' tasks the rest;
    # an item a unit, so 4 workers all get some. Ray Train takes one report a worker per 2-second poll: checkpoints
    # every 2 steps keep the kill mid-epoch (the slowest worker's epoch is ~19 steps)
    base = SMALL + [
        "data.synthetic.sentences_per_language=150",
        "data.tokenize_cpus=0.1",
        "data.corpus_mix_units=1",
        "data.corpus_cpus_per_worker=0.2",
        "train.cpus_per_worker=0.2",
        "train.max_steps=40",
        "train.checkpoint_every=2",
        "train.log_every=1",
        "eval.every=0",
        "train.max_failures=0",
        f"train.trace_rows={trace}",
        "run.name=elastic",
    ]
    config = load_config(QUICKSTART, base + ["train.num_workers=4"])
    client = MlflowClient(config.tracking.uri)
    killed: list[int] = []
    killer = threading.Thread(
        target=kill_a_worker_once_past, args=(client, config.tracking.experiment, "elastic", 2, killed), daemon=True
    )
    killer.start()
    with pytest.raises(ray.train.TrainingFailedError):  # no failure allowed: the run stops (a lost worker)
        run_training(config)
    killer.join(timeout=5)
    assert killed, "no worker was killed"

    # the same command again, on 2 workers (checkpoints and logs at the end only: the kill is behind it)
    outcome = run_training(
        load_config(QUICKSTART, base + ["train.num_workers=2", "train.checkpoint_every=40", "train.log_every=40"])
    )
    assert outcome.metrics["step"] == 40
    rows = trained_rows(trace, "corpus")
    assert {(workers, epoch) for workers, epoch, _ in rows} >= {(4, 0), (2, 0)}  # stopped mid-epoch
    first_epoch = [row for _, epoch, row in rows if epoch == 0]
    assert len(first_epoch) == len(set(first_epoch))  # no row trained twice
    assert sorted(first_epoch) == sorted(epoch_rows(config))  # and none skipped

    pairs = trained_rows(trace, "constraints")
    table_rows = len(prepare_data(config).constraints)
    positions = [epoch * table_rows + row for _, epoch, row in pairs]
    assert {workers for workers, _, _ in pairs} == {4, 2}
    assert sorted(positions) == list(range(len(positions)))  # each position once, none skipped, from the start
    assert max(positions) >= table_rows  # across an epoch of the draw
