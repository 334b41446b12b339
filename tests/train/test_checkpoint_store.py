"""The checkpoint store of a run trained in a Tune trial's process: Ray Train's layout and retention (the latest,
and ``keep`` best by the selection score or the newest), recovered by a restarted trial from storage alone, local
or S3; a resume reads the newest complete checkpoint, whoever wrote it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from distalign.checkpoint import MANIFEST_FILE, STATE_FILE, TrainerState, write_manifest, write_state
from distalign.train.checkpoint_store import REPORTED_FILE, CheckpointStore
from distalign.train.resume import resume_directory


def saved(tmp_path: Path, step: int) -> Path:
    """A complete one-rank checkpoint directory of ``step``."""
    directory = tmp_path / f"local-{step}"
    directory.mkdir()
    write_state(directory, TrainerState(step=step))
    write_manifest(directory, 0, 1)
    return directory


def steps(store: CheckpointStore) -> list[int]:
    """The kept checkpoints' steps, oldest first."""
    return [s.metrics["step"] for s in store.stored]


def fill(store: CheckpointStore, tmp_path: Path, scores: list[float | None]) -> None:
    for step, score in enumerate(scores, start=1):
        metrics = {"step": step} | ({"eval/score": score} if score is not None else {})
        store.save(saved(tmp_path, step), metrics)


def test_keeps_the_latest_and_the_best_by_score(tmp_path):
    store = CheckpointStore(str(tmp_path / "runs"), "", "trial-0", keep=2, score="eval/score", order="max")
    fill(store, tmp_path, [0.1, 0.5, 0.3, None, 0.2])
    # by hand: the two best are steps 2 (0.5) and 3 (0.3); step 5 is the latest; 1 and 4 (no score) are dropped
    assert steps(store) == [2, 3, 5]
    on_disk = sorted(p.name for p in (tmp_path / "runs" / "trial-0").iterdir())
    assert on_disk == [s.name for s in store.stored]
    assert json.loads((tmp_path / "runs" / "trial-0" / on_disk[0] / REPORTED_FILE).read_text())["eval/score"] == 0.5
    assert Path(store.best.path).name == on_disk[0] and Path(store.latest.path).name == on_disk[-1]


def test_min_order_nan_ranks_last_and_ties_go_to_the_newer(tmp_path):
    store = CheckpointStore(str(tmp_path / "runs"), "", "r", keep=2, score="loss", order="min")
    for step, loss in enumerate([2.0, math.nan, 1.0, 1.0, 3.0], start=1):
        store.save(saved(tmp_path, step), {"step": step, "loss": loss})
    assert steps(store) == [3, 4, 5]  # the two lowest (a tie: both kept) and the latest; NaN is worst
    assert Path(store.best.path).name == store.stored[1].name  # step 4: the newer of the tie


def test_without_a_score_the_newest_are_kept_and_there_is_no_best(tmp_path):
    store = CheckpointStore(str(tmp_path / "runs"), "", "r", keep=2)
    fill(store, tmp_path, [0.9, 0.1, 0.5])
    assert steps(store) == [2, 3] and store.best is None
    fresh = CheckpointStore(str(tmp_path / "runs"), "", "fresh", keep=0)
    assert fresh.latest is None and fresh.newest_first() == []
    assert resume_directory(fresh.newest_first(), rank=0) is None


def test_keep_0_keeps_every_checkpoint(tmp_path):
    store = CheckpointStore(str(tmp_path / "runs"), "", "r", keep=0, score="eval/score")
    fill(store, tmp_path, [0.3, 0.1, 0.2])
    assert steps(store) == [1, 2, 3] and Path(store.best.path).name == store.stored[0].name


def test_a_restarted_trial_finds_its_checkpoints_and_resumes_from_the_newest_complete(tmp_path):
    first = CheckpointStore(str(tmp_path / "runs"), "", "r", keep=3, score="eval/score")
    fill(first, tmp_path, [0.4, 0.6, 0.5])
    # one Ray Train wrote (no reported metrics), and the newest cut short by a crash (its manifest's file missing)
    run = tmp_path / "runs" / "r"
    (run / "checkpoint_2000-01-01_00-00-00.000000").mkdir()
    newest = run / f"{first.stored[-1].name}9"
    newest.mkdir()
    write_state(newest, TrainerState(step=9))
    write_manifest(newest, 0, 1)
    (newest / STATE_FILE).unlink()

    again = CheckpointStore(str(tmp_path / "runs"), "", "r", keep=3, score="eval/score")
    assert [s.metrics.get("step") for s in again.stored] == [None, 1, 2, 3, None]
    assert Path(again.best.path).name == first.stored[1].name  # 0.6, from the metrics stored beside it
    resumed = resume_directory(again.newest_first(), rank=0)
    assert json.loads((resumed / STATE_FILE).read_text())["step"] == 3
    assert (resumed / MANIFEST_FILE.format(rank=0)).is_file()


def test_the_store_on_s3(s3_endpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_CACHE", str(tmp_path / "node-cache"))
    url, s3 = s3_endpoint
    store = CheckpointStore("s3://ckpt/runs", url, "trial-s3", keep=1, score="eval/score")
    fill(store, tmp_path, [0.7, 0.2])
    keys = [key["Key"] for key in s3.list_objects_v2(Bucket="ckpt", Prefix="runs/trial-s3/")["Contents"]]
    listed = sorted({key.split("/")[2] for key in keys if key.count("/") > 2})
    assert listed == [s.name for s in store.stored] and steps(store) == [1, 2]
    again = CheckpointStore("s3://ckpt/runs", url, "trial-s3", keep=1, score="eval/score")
    assert Path(again.best.path).name == store.stored[0].name
    resumed = resume_directory(again.newest_first(), rank=0)
    assert json.loads((resumed / STATE_FILE).read_text())["step"] == 2
    with pytest.raises(RuntimeError, match="no complete checkpoint"):
        s3.delete_object(Bucket="ckpt", Key=f"runs/trial-s3/{store.stored[0].name}/{STATE_FILE}")
        s3.delete_object(Bucket="ckpt", Key=f"runs/trial-s3/{store.stored[1].name}/{STATE_FILE}")
        resume_directory(again.newest_first(), rank=0)


def test_a_local_store_stays_local_where_an_s3_endpoint_is_configured(tmp_path):
    """A cluster sets storage.endpoint_url (DISTALIGN_STORAGE_ENDPOINT) for its S3 data while a run keeps its
    checkpoints on a local or shared disk: the endpoint's S3 filesystem used to be taken for the local path
    ("ArrowInvalid: Path cannot start with a separator")."""
    from distalign.storage import ray_storage_path, run_location, storage_filesystem

    endpoint = "http://127.0.0.1:9"  # nothing listens: the local store must never ask it
    assert storage_filesystem(str(tmp_path), endpoint) is None
    assert ray_storage_path(str(tmp_path), endpoint) == str(tmp_path)
    assert storage_filesystem("s3://bucket/runs", endpoint) is not None
    assert ray_storage_path("s3://bucket/runs", endpoint) == "bucket/runs"
    fs, root, scheme = run_location(str(tmp_path / "runs"), endpoint, "trial-local")
    assert (type(fs).__name__, root, scheme) == ("LocalFileSystem", str(tmp_path / "runs" / "trial-local"), "")
    store = CheckpointStore(str(tmp_path / "runs"), endpoint, "trial-local", keep=1, score="eval/score")
    fill(store, tmp_path, [0.7, 0.2])
    assert steps(store) == [1, 2]
    assert all((tmp_path / "runs" / "trial-local" / s.name).is_dir() for s in store.stored)
