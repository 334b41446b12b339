"""MLflow tracking. The driver owns the run's life (create or resume, params, config, final status);
rank 0 of the workers logs metrics into it by run id. Nothing here runs on other ranks.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from distalign.errors import ConfigError

if TYPE_CHECKING:  # MLflow (~2 s) is imported where it is used: not by every process that imports this module
    from mlflow.tracking import MlflowClient

RUN_NAME_TAG = "distalign.run_name"
STORAGE_TAG = "distalign.storage"
CHECKPOINT_TAG = "distalign.checkpoint"
BEST_CHECKPOINT_TAG = "distalign.best_checkpoint"  # highest model-selection score
START_MODEL_TAG = "distalign.start_model"  # the model the run started from (a tiny model: its cached directory)
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own tag for nested runs
# MLflow 3's experiment kind, as its UI's kind selector writes it: model training, not GenAI development.
# MLflow 3.17's UI picks its view from the GenAI / Model training switch instead (the URL's workflowType, then
# the browser's last choice): distalign's links carry ``ML_VIEW``.
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"
ML_VIEW = "workflowType=machine_learning"
MAX_PARAM_LENGTH = 6000
REFUSED = "INVALID_PARAMETER_VALUE"  # MLflow's error code for a request it will never accept (e.g. a bad name)

log = logging.getLogger("distalign")


def check_reachable(uri: str, timeout_s: float = 5.0) -> None:
    """Fail at once, naming the URI, when an HTTP tracking server does not answer (MLflow itself retries
    for minutes before giving up) or refuses the credentials MLflow would send (its ``/health`` asks for none, so
    the probe is an API call); other stores (sqlite, files, databricks) are left to MLflow."""
    if not uri.startswith(("http://", "https://")):
        return
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    try:
        response = http_request(
            get_default_host_creds(uri),
            "/api/2.0/mlflow/experiments/search",
            "GET",
            max_retries=0,
            timeout=timeout_s,
            raise_on_status=False,
            params={"max_results": 1},
        )
    except Exception as err:  # MLflow wraps the connection error (refused, timed out, no such host)
        cause = re.search(r"\[Errno -?\d+\] [^\"')]*|Read timed out|timed out", str(err))
        reason = cause.group(0) if cause else str(err)[-300:]
        raise ConfigError(
            f"tracking.uri {uri}: the MLflow tracking server does not answer ({reason}); start it, "
            "or give a reachable tracking.uri (or a sqlite:/// file)"
        ) from None
    if response.status_code in (401, 403):
        raise ConfigError(
            f"tracking.uri {uri}: the MLflow tracking server refuses the request (HTTP "
            f"{response.status_code}): set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or "
            "MLFLOW_TRACKING_TOKEN) to an account of that server"
        )


def client_for(uri: str) -> MlflowClient:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def open_store_in_background(uri: str) -> threading.Thread:
    """Open the tracking store on a thread (MLflow keeps it for the process): a sqlite store checks its schema
    (~0.6 s) or creates it (~1.5 s), which the driver can do while Ray starts instead of after."""

    def open_store() -> None:
        try:
            client_for(uri).search_experiments(max_results=1)
        except Exception:  # raised again, with its context, where the run is opened
            pass

    thread = threading.Thread(target=open_store, name="open the tracking store", daemon=True)
    thread.start()
    return thread


def experiment_id(client: MlflowClient, name: str) -> str:
    """The experiment's id, created (tagged as model training) if missing."""
    experiment = client.get_experiment_by_name(name)
    if experiment:
        if EXPERIMENT_KIND_TAG not in experiment.tags:  # made before distalign tagged its experiments
            client.set_experiment_tag(experiment.experiment_id, EXPERIMENT_KIND_TAG, MODEL_TRAINING)
        return experiment.experiment_id
    # Artifacts of a sqlite store sit beside the database, not in whatever the working directory is
    # (a `ray job submit` job runs in a temporary copy of it).
    uri = client.tracking_uri
    location = None
    if uri.startswith("sqlite:///"):
        location = (Path(uri.removeprefix("sqlite:///")).parent / "mlruns").as_uri()
    return client.create_experiment(name, artifact_location=location, tags={EXPERIMENT_KIND_TAG: MODEL_TRAINING})


LOCAL_UI = "http://127.0.0.1:5000"  # where `mlflow ui` (make mlflow-ui) serves a local store


def run_url(uri: str, experiment: str, run_id: str) -> str:
    """A run's page in the MLflow UI, in its model-training view: the tracking server's own UI, or that of
    `mlflow ui` on a local store."""
    ui = uri if uri.startswith(("http://", "https://")) else LOCAL_UI
    return f"{ui.rstrip('/')}/#/experiments/{experiment}/runs/{run_id}?{ML_VIEW}"


def find_run(client: MlflowClient, exp_id: str, run_name: str, storage: str) -> str | None:
    """The most recent MLflow run of a training run name in this storage (for resumes)."""
    runs = client.search_runs(
        [exp_id],
        filter_string=f"tags.`{RUN_NAME_TAG}` = '{run_name}' and tags.`{STORAGE_TAG}` = '{storage}'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def log_params(client: MlflowClient, run_id: str, params: dict[str, Any]) -> None:
    from mlflow.entities import Param

    items = [Param(k, str(v)[:MAX_PARAM_LENGTH]) for k, v in params.items()]
    for start in range(0, len(items), 100):  # MLflow accepts at most 100 params per batch
        client.log_batch(run_id, params=items[start : start + 100])


def log_dict_artifact(client: MlflowClient, run_id: str, data: dict, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        client.log_artifact(run_id, str(path))


def open_run(
    client: MlflowClient, experiment: str, run_name: str, storage: str, parent_run_id: str, tags: dict[str, str] | None
) -> tuple[str, bool]:
    """The id of the run created for ``run_name``, or of its run seen before in this storage (then set RUNNING
    again), and whether it was seen before."""
    from mlflow.entities import RunStatus

    exp_id = experiment_id(client, experiment)
    run_id = find_run(client, exp_id, run_name, storage)
    if run_id is not None:
        client.update_run(run_id, status=RunStatus.to_string(RunStatus.RUNNING))
        return run_id, True
    tags = {**(tags or {}), RUN_NAME_TAG: run_name, STORAGE_TAG: storage}
    if parent_run_id:
        tags[PARENT_TAG] = parent_run_id
    return client.create_run(exp_id, run_name=run_name, tags=tags).info.run_id, False


@contextlib.contextmanager
def tracked_run(
    uri: str,
    experiment: str,
    run_name: str,
    storage: str,
    params: dict[str, Any],
    config: dict,
    parent_run_id: str = "",
    tags: dict[str, str] | None = None,
) -> Iterator[str]:
    """Create (or, for a run name seen before in this storage, reopen) the MLflow run; yield its id.

    The run ends FINISHED, or FAILED if the body raises (the exception propagates), so a crashed
    job never leaves a run RUNNING; KILLED on ``SystemExit(0)``, how Ray Tune stops a trial (ASHA) in its thread.
    """
    from mlflow.exceptions import MlflowException

    client = client_for(uri)
    try:
        run_id, resumed = open_run(client, experiment, run_name, storage, parent_run_id, tags)
    except MlflowException as err:  # a server with auth: this user may read the experiment but not write to it
        if err.error_code not in ("PERMISSION_DENIED", "UNAUTHENTICATED"):
            raise
        user = os.environ.get("MLFLOW_TRACKING_USERNAME")
        who = f"user {user}" if user else "this client"
        raise ConfigError(
            f"tracking.uri {uri}: the MLflow tracking server refuses {who} a run in experiment "
            f"'{experiment}' ({err.error_code}: {str(err).splitlines()[0][-200:]}): ask its admin for "
            "EDIT permission on the experiment, or set tracking.experiment to a new name (created as "
            "yours)"
        ) from None
    try:
        if not resumed:  # MLflow params are immutable: a resumed run keeps its first params; its config goes beside
            log_params(client, run_id, params)
        try:  # the run's first use of its artifact store
            count = sum(1 for a in client.list_artifacts(run_id) if a.path.startswith("config")) if resumed else 0
            log_dict_artifact(client, run_id, config, f"config.resume{count}.yaml" if resumed else "config.yaml")
        except Exception as err:  # boto3's, a proxying server's, or the file system's own
            raise unwritable_artifacts(client, uri, run_id, err) from None
        yield run_id
    except SystemExit as stop:  # Tune ends a stopped trial's thread by sys.exit(0) after a report: not a crash
        client.set_terminated(run_id, status="KILLED" if stop.code in (0, None) else "FAILED")
        raise
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")


def unwritable_artifacts(client: MlflowClient, uri: str, run_id: str, err: Exception) -> ConfigError:
    """The error of a run whose artifacts cannot be written: where they go and what to check there."""
    location = client.get_run(run_id).info.artifact_uri
    return ConfigError(
        f"tracking.uri {uri}: run {run_id}'s artifacts cannot be written to {location} "
        f"({type(err).__name__}: {str(err)[-300:]}): for s3:// artifacts check AWS_ACCESS_KEY_ID / "
        "AWS_SECRET_ACCESS_KEY (and MLFLOW_S3_ENDPOINT_URL) or the bucket policy; for "
        "mlflow-artifacts:/ the tracking server's own access to its artifact store. The run is marked "
        "FAILED"
    )


# A training worker sends everything through MetricLogger, whose queue retries by itself: one attempt per
# request there, so an outage shows (and is reported) at once instead of after MLflow's minutes of retries.
WORKER_HTTP_SETTINGS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
QueuedMetric = tuple[str, float, int, int]  # key, value, timestamp (ms), step: MLflow's Metric, made when sent
_MLFLOW_IMPORT = threading.Lock()


def mlflow_imported() -> None:
    """Import the parts of MLflow a worker's background threads use, one thread at a time. MLflow's modules import one
    another in circles: two threads importing parts of it at once (rank 0's metric sender and its system-metrics
    sampler, both started together) deadlock on a module lock, which Python breaks by failing one import
    (``_DeadlockError``, "partially initialized module"), and MLflow's protobuf registry stays broken for the process:
    every later send failed as if the server were down."""
    with _MLFLOW_IMPORT:
        import mlflow.entities
        import mlflow.exceptions
        import mlflow.system_metrics.metrics.cpu_monitor
        import mlflow.system_metrics.metrics.disk_monitor
        import mlflow.system_metrics.metrics.gpu_monitor
        import mlflow.system_metrics.metrics.network_monitor
        import mlflow.tracking  # noqa: F401  (the names are imported where used; here only the modules, locked)


class MetricLogger:
    """Metrics of one run by id, sent by a background thread: training never waits on the tracking server.

    While the server does not answer, the values stay queued in order and are retried every ``retry_every_s``;
    they are sent when it answers again. ``close`` waits up to ``flush_timeout_s`` for the queue, then counts
    what is left as dropped and says so. (MLflow's asynchronous logging drops a batch whose request fails.)
    Used inside Ray Train workers: by rank 0, and by each node's system-metrics sampler.
    """

    MAX_METRICS_PER_REQUEST = 1000  # MLflow's log_batch limit

    def __init__(self, uri: str, run_id: str, retry_every_s: float = 2.0, flush_timeout_s: float = 120.0):
        self.uri, self.run_id = uri, run_id
        # made by the sending thread: importing MLflow and opening its store take seconds a worker's first step
        # would otherwise wait for
        self.client: MlflowClient | None = None
        self.retry_every_s, self.flush_timeout_s = retry_every_s, flush_timeout_s
        self._queue: collections.deque[QueuedMetric] = collections.deque()
        self._changed = threading.Condition()
        self._closing = self._abandoned = False
        self.refused = 0  # values the server refused (a bad name or value): counted as dropped by close
        self._thread = threading.Thread(target=self._send_until_closed, name="distalign-metrics", daemon=True)
        self._thread.start()

    def log(self, metrics: dict[str, float], step: int) -> None:
        timestamp = int(time.time() * 1000)  # MLflow's own stamp: milliseconds since the epoch
        with self._changed:
            self._queue.extend((k, float(v), timestamp, step) for k, v in metrics.items())
            self._changed.notify()

    def close(self) -> int:
        """Send what is queued, waiting at most ``flush_timeout_s``; returns the number of values dropped (still
        queued, or refused by the server)."""
        with self._changed:
            self._closing = True
            self._changed.notify()
        self._thread.join(self.flush_timeout_s)
        with self._changed:
            dropped, self._abandoned = len(self._queue), True
            self._queue.clear()
        if dropped:
            log.warning(
                "tracking server %s did not answer: %d metric values of run %s were dropped",
                self.uri,
                dropped,
                self.run_id,
            )
        return dropped + self.refused

    def _send_until_closed(self) -> None:
        unreachable_since = None
        while True:
            with self._changed:
                while not self._queue and not self._closing:
                    self._changed.wait()
                if not self._queue or self._abandoned:
                    return
                batch = list(itertools.islice(self._queue, self.MAX_METRICS_PER_REQUEST))
            try:
                self._send(batch)
            except Exception as err:  # any failure but a refusal: keep the values, try again
                if unreachable_since is None:
                    unreachable_since = time.monotonic()
                    log.warning(
                        "tracking server %s unreachable (%s): training goes on, metrics are queued",
                        self.uri,
                        str(err).splitlines()[0][:200] if str(err) else type(err).__name__,
                    )
                time.sleep(self.retry_every_s)
                continue
            if unreachable_since is not None:
                log.info(
                    "tracking server %s answers again after %.0f s: sending %d queued metric values",
                    self.uri,
                    time.monotonic() - unreachable_since,
                    len(self._queue) + len(batch),
                )
                unreachable_since = None

    def _send(self, queued: list[QueuedMetric]) -> None:
        """Send the queue's first values, ``queued``, and take them off the queue. A batch the server refuses
        as a whole (a name or value it never accepts) would block every later value: its values are then sent
        singly, the refused ones counted and named once, never retried."""
        if self.client is None:  # the first send: MLflow imported and its store opened on this thread
            mlflow_imported()
            self.client = client_for(self.uri)
        from mlflow.entities import Metric
        from mlflow.exceptions import MlflowException

        batch = [Metric(*values) for values in queued]
        try:
            self.client.log_batch(self.run_id, metrics=batch)
            self._done(len(batch))
            return
        except MlflowException as err:
            if err.error_code != REFUSED:
                raise
        refused = []
        for metric in batch:
            try:
                self.client.log_batch(self.run_id, metrics=[metric])
            except MlflowException as err:
                if err.error_code != REFUSED:
                    raise
                refused.append(f"{metric.key} at step {metric.step} ({str(err).splitlines()[0][:200]})")
                self.refused += 1
            self._done(1)  # sent or refused: never sent twice when the server goes away mid-batch
        if refused:  # else the batch was refused only as a whole
            log.error(
                "tracking server %s refused %d metric values of run %s, not retried: %s",
                self.uri,
                len(refused),
                self.run_id,
                "; ".join(refused),
            )

    def _done(self, count: int) -> None:
        with self._changed:
            if not self._abandoned:
                for _ in range(count):
                    self._queue.popleft()


class SystemMetricsSampler:
    """This node's CPU, memory, disk and network use, and its GPUs' (with nvidia-ml-py and a driver), read by
    MLflow's system-metrics monitors every ``every_s`` and logged as ``system/<node>/<name>`` at the training
    step of the moment, through a ``MetricLogger`` (so an unreachable server only delays them)."""

    def __init__(self, logger: MetricLogger, node: str, current_step: Callable[[], int], every_s: float):
        self.logger, self.prefix, self.current_step, self.every_s = logger, f"system/{node}/", current_step, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, name="distalign-system-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    @staticmethod
    def _monitors() -> list:
        mlflow_imported()
        from mlflow.system_metrics.metrics.cpu_monitor import CPUMonitor
        from mlflow.system_metrics.metrics.disk_monitor import DiskMonitor
        from mlflow.system_metrics.metrics.gpu_monitor import GPUMonitor
        from mlflow.system_metrics.metrics.network_monitor import NetworkMonitor

        monitors = [CPUMonitor(), DiskMonitor(), NetworkMonitor()]
        try:
            monitors.append(GPUMonitor())
        except (ImportError, RuntimeError):  # no nvidia-ml-py, or no NVIDIA driver/GPU on this node
            pass
        return monitors

    def _sample_until_stopped(self) -> None:
        monitors = self._monitors()  # on this thread: MLflow's import is not the training thread's wait
        while not self._stop.wait(self.every_s):
            values: dict[str, float] = {}
            for monitor in monitors:
                monitor.collect_metrics()
                values.update(monitor.aggregate_metrics())
                monitor.clear_metrics()
            self.logger.log({self.prefix + name: value for name, value in values.items()}, self.current_step())
