"""Shared fixtures: a real local Ray cluster, small-config overrides, an isolated DISTALIGN_HOME."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "jobs" / "configs" / "quickstart.yaml"
SHARED_DATA = REPO.parent / "shared" / "data"

# The quickstart world and loop shrunk so a 2-worker run takes seconds.
SMALL = [
    "data.synthetic.num_concepts=80",
    "data.synthetic.sentences_per_language=300",
    "train.max_steps=6",
    "train.checkpoint_every=3",
    "train.log_every=2",
    "train.warmup_steps=2",
    "train.constraint_batch_size=16",
    "train.corpus_batch_size=8",
    "eval.every=3",
    "eval.bli_max_pairs=40",
]


@pytest.fixture(scope="session")
def ray_local():
    """One real local Ray cluster (2 CPUs) for every test that trains."""
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=True)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def distalign_home(tmp_path_factory):
    """DISTALIGN_HOME (runs/, mlflow.db) in a fresh directory for the whole test module."""
    home = tmp_path_factory.mktemp("home")
    saved = {k: os.environ.get(k) for k in ("DISTALIGN_HOME", "MLFLOW_TRACKING_URI")}
    os.environ["DISTALIGN_HOME"] = str(home)
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
