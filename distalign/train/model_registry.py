"""A run's selected checkpoint in MLflow's Model Registry (``tracking.registered_model_name``): its model and
tokenizer logged as an MLflow model of the transformers flavour (a fill-mask pipeline), attached to the run
that trained it, and registered as the name's next version. A reviewer finds it under "Models" and loads it
with ``mlflow.transformers.load_model("models:/<name>/<version>")``."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import ray.train

from distalign.checkpoint import MODEL_DIR
from distalign.storage import checkpoint_uri, ray_storage_path, storage_filesystem
from distalign.tracking import CHECKPOINT_TAG, client_for

if TYPE_CHECKING:  # MLflow is imported when a model is registered: the driver has not needed it before its run opens
    from mlflow.entities.model_registry import ModelVersion

log = logging.getLogger("distalign")


@contextlib.contextmanager
def _tracking_uri(uri: str) -> Iterator[None]:
    """MLflow's model logging and registration use the process's tracking URI, not a client's: ``uri`` for the
    block, then what was there before (MLflow also writes it into the environment, which is put back too)."""
    from mlflow.tracking._tracking_service.utils import _use_tracking_uri

    saved = os.environ.get("MLFLOW_TRACKING_URI")
    try:
        with _use_tracking_uri(uri):
            yield
    finally:
        if saved is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = saved


def register_model(uri: str, run_id: str, checkpoint_dir: Path, name: str, source: str) -> ModelVersion:
    """Log the model of a local checkpoint directory into run ``run_id`` and register it as ``name``; the
    version is tagged with ``source``, the checkpoint's location."""
    import mlflow.transformers
    import torch
    import transformers

    from distalign.models.loading import load_masked_lm, load_tokenizer

    model_dir = str(checkpoint_dir / MODEL_DIR)
    client = client_for(uri)
    experiment = client.get_run(run_id).info.experiment_id
    # created here, not by log_model: its own would land in the default experiment (no active fluent run)
    logged = client.create_logged_model(experiment, name="model", source_run_id=run_id)
    with _tracking_uri(uri):
        info = mlflow.transformers.log_model(
            {"model": load_masked_lm(model_dir), "tokenizer": load_tokenizer(model_dir)},
            task="fill-mask",
            name="model",
            run_id=run_id,
            model_id=logged.model_id,
            registered_model_name=name,
            # what loading it takes (MLflow's own guess imports torchvision, which is not installed)
            pip_requirements=[f"torch=={torch.__version__.split('+')[0]}", f"transformers=={transformers.__version__}"],
        )
    version = str(info.registered_model_version)
    client.set_model_version_tag(name, version, CHECKPOINT_TAG, source)  # the checkpoint it came from
    log.info("model of %s registered as %s version %s (models:/%s/%s)", source, name, version, name, version)
    return client.get_model_version(name, version)


def register_checkpoint(
    uri: str, run_id: str, checkpoint: ray.train.Checkpoint | str, endpoint_url: str, name: str
) -> ModelVersion:
    """``register_model`` for a Ray Train checkpoint, or a checkpoint's location (a path or ``s3://`` URI; at
    ``endpoint_url`` when set), downloaded to a temporary directory first when remote."""
    if isinstance(checkpoint, str):
        checkpoint = ray.train.Checkpoint(
            ray_storage_path(checkpoint, endpoint_url), filesystem=storage_filesystem(checkpoint, endpoint_url)
        )
    with checkpoint.as_directory() as directory:
        return register_model(uri, run_id, Path(directory), name, checkpoint_uri(checkpoint))
