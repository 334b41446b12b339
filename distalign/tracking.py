"""MLflow tracking. The driver owns the run's life (create or resume, params, config, final status);
rank 0 of the workers logs metrics into it by run id. Nothing here runs on other ranks.
"""

from __future__ import annotations

import contextlib
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import mlflow
import yaml
from mlflow.entities import Metric, Param, RunStatus
from mlflow.tracking import MlflowClient

from distalign.errors import ConfigError

RUN_NAME_TAG = "distalign.run_name"
STORAGE_TAG = "distalign.storage"
CHECKPOINT_TAG = "distalign.checkpoint"
BEST_CHECKPOINT_TAG = "distalign.best_checkpoint"  # highest model-selection score
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own tag for nested runs
MAX_PARAM_LENGTH = 6000


def check_reachable(uri: str, timeout_s: float = 5.0) -> None:
    """Fail at once, naming the URI, when an HTTP tracking server does not answer (MLflow itself retries
    for minutes before giving up); other stores (sqlite, files, databricks) are left to MLflow."""
    if not uri.startswith(("http://", "https://")):
        return
    try:
        urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout_s)
    except urllib.error.HTTPError:
        return  # it answered (an auth error or an older server without /health still means it is up)
    except OSError as err:
        raise ConfigError(f"tracking.uri {uri}: the MLflow tracking server does not answer "
                          f"({getattr(err, 'reason', err)})") from None


def client_for(uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=uri)


def experiment_id(client: MlflowClient, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment:
        return experiment.experiment_id
    # Artifacts of a sqlite store sit beside the database, not in whatever the working directory is
    # (a `ray job submit` job runs in a temporary copy of it).
    uri = client.tracking_uri
    location = None
    if uri.startswith("sqlite:///"):
        location = (Path(uri.removeprefix("sqlite:///")).parent / "mlruns").as_uri()
    return client.create_experiment(name, artifact_location=location)


def find_run(client: MlflowClient, exp_id: str, run_name: str, storage: str) -> str | None:
    """The most recent MLflow run of a training run name in this storage (for resumes)."""
    runs = client.search_runs(
        [exp_id],
        filter_string=f"tags.`{RUN_NAME_TAG}` = '{run_name}' and tags.`{STORAGE_TAG}` = '{storage}'",
        order_by=["attributes.start_time DESC"], max_results=1,
    )
    return runs[0].info.run_id if runs else None


def log_params(client: MlflowClient, run_id: str, params: dict[str, Any]) -> None:
    items = [Param(k, str(v)[:MAX_PARAM_LENGTH]) for k, v in params.items()]
    for start in range(0, len(items), 100):  # MLflow accepts at most 100 params per batch
        client.log_batch(run_id, params=items[start:start + 100])


def log_dict_artifact(client: MlflowClient, run_id: str, data: dict, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        client.log_artifact(run_id, str(path))


@contextlib.contextmanager
def tracked_run(uri: str, experiment: str, run_name: str, storage: str, params: dict[str, Any],
                config: dict, parent_run_id: str = "") -> Iterator[str]:
    """Create (or, for a run name seen before in this storage, reopen) the MLflow run; yield its id.

    The run ends FINISHED, or FAILED if the body raises (the exception propagates), so a crashed
    job never leaves a run RUNNING.
    """
    client = client_for(uri)
    exp_id = experiment_id(client, experiment)
    run_id = find_run(client, exp_id, run_name, storage)
    if run_id is None:
        tags = {RUN_NAME_TAG: run_name, STORAGE_TAG: storage}
        if parent_run_id:
            tags[PARENT_TAG] = parent_run_id
        run_id = client.create_run(exp_id, run_name=run_name, tags=tags).info.run_id
        log_params(client, run_id, params)
        log_dict_artifact(client, run_id, config, "config.yaml")
    else:
        # MLflow params are immutable: a resumed run keeps its first params; the new config is kept beside.
        client.update_run(run_id, status=RunStatus.to_string(RunStatus.RUNNING))
        count = sum(1 for a in client.list_artifacts(run_id) if a.path.startswith("config"))
        log_dict_artifact(client, run_id, config, f"config.resume{count}.yaml")
    try:
        yield run_id
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")


class MetricLogger:
    """Metrics of one run by id; used by rank 0 inside Ray Train workers."""

    def __init__(self, uri: str, run_id: str):
        self.client = client_for(uri)
        self.run_id = run_id

    def log(self, metrics: dict[str, float], step: int) -> None:
        timestamp = mlflow.utils.time.get_current_time_millis()
        items = [Metric(k, float(v), timestamp, step) for k, v in metrics.items()]
        self.client.log_batch(self.run_id, metrics=items)
