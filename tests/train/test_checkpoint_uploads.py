"""Checkpoints uploaded in the background (``distalign.train.uploads``) and their wall-clock cadence: a failed
upload is raised at the next checkpoint, naming the local directory its files are kept in; an uploaded one's local
directory is removed. On a real S3 endpoint (moto's server), through the one-worker session's report."""

from __future__ import annotations

import logging
import time

import pytest
import torch

from distalign.checkpoint import MANIFEST_FILE, STATE_FILE, TrainerState, write_state
from distalign.train.checkpoint_store import CheckpointStore
from distalign.train.in_process import InProcessWorker
from distalign.train.recipe import CheckpointCadence
from distalign.train.uploads import UploadFailed


def session(url: str, bucket: str) -> InProcessWorker:
    store = CheckpointStore(f"s3://{bucket}/runs", url, "uploads", keep=0)
    return InProcessWorker(store=store, device=torch.device("cpu"), forward=lambda metrics: None)


def test_an_upload_failure_is_raised_at_the_next_checkpoint_and_its_files_are_kept(s3_endpoint, caplog):
    url, s3 = s3_endpoint
    s3.create_bucket(Bucket="doomed")
    worker = session(url, "doomed")
    directory = worker.checkpoint_directory()
    write_state(directory, TrainerState(step=1))
    s3.delete_bucket(Bucket="doomed")  # the storage goes away while the run trains on
    worker.report({"step": 1}, directory)
    with pytest.raises(UploadFailed, match=f"kept in {directory}") as raised:
        worker.checkpoint_directory()
    assert isinstance(raised.value.__cause__, OSError)  # the storage's own error: a restart may cure it
    assert (directory / STATE_FILE).is_file() and (directory / MANIFEST_FILE.format(rank=0)).is_file()
    assert any(record.levelno == logging.ERROR and str(directory) in record.getMessage() for record in caplog.records)
    worker.wait_for_uploads()  # reported once, not again


def test_an_uploaded_checkpoint_leaves_no_local_copy(s3_endpoint):
    url, s3 = s3_endpoint
    worker = session(url, "ckpt")
    directory = worker.checkpoint_directory()
    write_state(directory, TrainerState(step=2))
    worker.report({"step": 2}, directory)
    worker.wait_for_uploads()
    assert not directory.exists()
    assert [s.metrics for s in worker.store.stored] == [{"step": 2}]
    stored = s3.list_objects_v2(Bucket="ckpt", Prefix=f"runs/uploads/{worker.store.stored[0].name}/")["Contents"]
    assert {item["Key"].rsplit("/", 1)[1] for item in stored} >= {STATE_FILE, MANIFEST_FILE.format(rank=0)}


def test_checkpoints_are_due_by_steps_and_by_wall_clock():
    by_steps = CheckpointCadence(every_steps=5, every_minutes=0)
    assert [step for step in range(1, 12) if by_steps.due(step)] == [5, 10]
    cadence = CheckpointCadence(every_steps=50, every_minutes=0.01)  # 0.6 s
    assert not cadence.due(1)
    time.sleep(0.7)
    assert cadence.due(2)
    cadence.saved()
    assert not cadence.due(3) and cadence.due(50)
