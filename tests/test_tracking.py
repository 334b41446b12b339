"""distalign.tracking against a real sqlite MLflow store."""

import subprocess
import sys
import uuid

import pytest
import yaml
from mlflow.tracking import MlflowClient

from distalign import tracking
from distalign.config import load_config
from distalign.tracking import PARENT_TAG, RUN_NAME_TAG, STORAGE_TAG, MetricLogger, tracked_run


@pytest.fixture(scope="module")
def uri(tmp_path_factory):
    # One store for the module: creating the sqlite schema takes a few seconds.
    path = tmp_path_factory.mktemp("mlflow")
    return f"sqlite:///{path}/mlflow.db"


@pytest.fixture(scope="module")
def client(uri):
    return MlflowClient(tracking_uri=uri)


@pytest.fixture
def experiment():
    return f"exp-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    return load_config(None, ["train.lr=2e-3", "run.name=r1"])


def read_artifact(client, run_id, name, tmp_path):
    local = client.download_artifacts(run_id, name, str(tmp_path))
    with open(local) as f:
        return yaml.safe_load(f)


def test_tracked_run_creates_finished_run(uri, client, experiment, config, tmp_path):
    with tracked_run(uri, experiment, "r1", "/store/a", config.flat(), config.to_dict()) as run_id:
        assert client.get_run(run_id).info.status == "RUNNING"
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "r1"
    assert client.get_experiment(run.info.experiment_id).name == experiment
    params = run.data.params
    assert params["train.lr"] == "0.002"
    assert params["model.tiny.hidden_size"] == str(config.model.tiny.hidden_size)
    assert params["data.synthetic.languages"] == "['xa', 'xb', 'xc']"
    assert len(params) == len(config.flat())
    assert run.data.tags[RUN_NAME_TAG] == "r1" and run.data.tags[STORAGE_TAG] == "/store/a"
    assert PARENT_TAG not in run.data.tags
    assert [a.path for a in client.list_artifacts(run_id)] == ["config.yaml"]
    assert read_artifact(client, run_id, "config.yaml", tmp_path) == config.to_dict()


def test_experiments_are_created_as_model_training_and_older_ones_tagged(uri, client, experiment):
    """MLflow 3's experiment kind: distalign's experiments are model training, not GenAI development."""
    with tracked_run(uri, experiment, "r", "s", {}, {}) as run_id:
        pass
    assert client.get_experiment_by_name(experiment).tags[tracking.EXPERIMENT_KIND_TAG] == "custom_model_development"
    older = client.create_experiment(f"{experiment}-older")  # made before distalign tagged its experiments
    assert tracking.experiment_id(client, f"{experiment}-older") == older
    assert client.get_experiment(older).tags[tracking.EXPERIMENT_KIND_TAG] == "custom_model_development"
    assert (
        tracking.run_url(uri, "3", run_id)
        == f"http://127.0.0.1:5000/#/experiments/3/runs/{run_id}?workflowType=machine_learning"
    )
    assert (
        tracking.run_url("https://mlflow.example.org/", "3", "abc")
        == "https://mlflow.example.org/#/experiments/3/runs/abc?workflowType=machine_learning"
    )


def test_body_exception_marks_failed_and_propagates(uri, client, experiment):
    seen = {}
    with pytest.raises(RuntimeError, match="boom"):
        with tracked_run(uri, experiment, "crash", "/store/a", {"a": 1}, {"a": 1}) as run_id:
            seen["id"] = run_id
            raise RuntimeError("boom")
    assert client.get_run(seen["id"]).info.status == "FAILED"
    with pytest.raises(KeyboardInterrupt):
        with tracked_run(uri, experiment, "interrupted", "/store/a", {}, {}) as run_id:
            seen["id2"] = run_id
            raise KeyboardInterrupt
    assert client.get_run(seen["id2"]).info.status == "FAILED"
    with pytest.raises(SystemExit):
        with tracked_run(uri, experiment, "exits-1", "/store/a", {}, {}) as run_id:
            seen["id3"] = run_id
            raise SystemExit(1)
    assert client.get_run(seen["id3"]).info.status == "FAILED"


def test_a_trial_tune_stops_is_killed_not_failed(uri, client, experiment):
    """Ray Tune stops a trial (ASHA) by ``sys.exit(0)`` in the trial's training thread, possibly after the study
    closed the run as KILLED (the stop does not wait for the thread): the thread must not turn it into FAILED."""
    with pytest.raises(SystemExit):
        with tracked_run(uri, experiment, "stopped", "/store/a", {}, {}) as run_id:
            client.set_terminated(run_id, "KILLED")  # the study's close_stopped_trials came first
            raise SystemExit(0)
    assert client.get_run(run_id).info.status == "KILLED"


def test_same_name_and_storage_resumes(uri, client, experiment, tmp_path):
    with pytest.raises(ValueError):
        with tracked_run(uri, experiment, "r", "/store/a", {"train.lr": 0.1}, {"v": 1}) as first:
            raise ValueError("crash before the resume")
    with tracked_run(uri, experiment, "r", "/store/a", {"train.lr": 0.2}, {"v": 2}) as second:
        assert client.get_run(second).info.status == "RUNNING"
    assert second == first
    run = client.get_run(first)
    assert run.info.status == "FINISHED"
    assert run.data.params["train.lr"] == "0.1"  # params are immutable: the first ones stay
    paths = sorted(a.path for a in client.list_artifacts(first))
    assert paths == ["config.resume1.yaml", "config.yaml"]
    assert read_artifact(client, first, "config.resume1.yaml", tmp_path / "a") == {"v": 2}
    assert read_artifact(client, first, "config.yaml", tmp_path / "b") == {"v": 1}
    # a finished run is reopened too (a later job continuing the same training run)
    with tracked_run(uri, experiment, "r", "/store/a", {}, {"v": 3}) as third:
        pass
    assert third == first and client.get_run(first).info.status == "FINISHED"
    assert "config.resume2.yaml" in {a.path for a in client.list_artifacts(first)}
    # a different storage (or name) is a different training run: a new MLflow run
    with tracked_run(uri, experiment, "r", "/store/b", {}, {}) as other_storage:
        pass
    with tracked_run(uri, experiment, "r-2", "/store/a", {}, {}) as other_name:
        pass
    assert len({first, other_storage, other_name}) == 3
    exp_id = client.get_experiment_by_name(experiment).experiment_id
    assert len(client.search_runs([exp_id])) == 3


def test_parent_run_id_tag(uri, client, experiment):
    with tracked_run(uri, experiment, "study", "/store/a", {}, {}) as parent:
        with tracked_run(uri, experiment, "study-000", "/store/a", {}, {}, parent_run_id=parent) as child:
            pass
    assert client.get_run(child).data.tags[PARENT_TAG] == parent
    assert PARENT_TAG not in client.get_run(parent).data.tags


def test_many_params_are_logged_in_batches(uri, client, experiment):
    params = {f"p.{i:03d}": i for i in range(250)} | {"long": "x" * 10000}
    with tracked_run(uri, experiment, "wide", "/store/a", params, {}) as run_id:
        pass
    logged = client.get_run(run_id).data.params
    assert len(logged) == 251 and logged["p.249"] == "249"
    assert 0 < len(logged["long"]) <= 6000


def test_metric_logger_writes_steps(uri, client, experiment):
    with tracked_run(uri, experiment, "metrics", "/store/a", {}, {}) as run_id:
        logger = MetricLogger(uri, run_id)
        logger.log({"Train/loss": 2.5, "Train/lr": 1e-3}, step=10)
        logger.log({"Train/loss": 1.25}, step=20)
        logger.log({"eval/bli/avg/mrr": 0.5}, step=20)
        assert logger.close() == 0  # all sent
    history = client.get_metric_history(run_id, "Train/loss")
    assert sorted((m.step, m.value) for m in history) == [(10, 2.5), (20, 1.25)]
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "Train/lr")] == [(10, 1e-3)]
    latest = client.get_run(run_id).data.metrics
    assert latest == {"Train/loss": 1.25, "Train/lr": 1e-3, "eval/bli/avg/mrr": 0.5}


def test_sqlite_store_keeps_artifacts_beside_the_database(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not where the database is
    db_dir = tmp_path / "store"
    db_dir.mkdir()
    uri = f"sqlite:///{db_dir}/mlflow.db"
    client = tracking.client_for(uri)
    exp = client.get_experiment(tracking.experiment_id(client, "artifacts-here"))
    assert exp.artifact_location == (db_dir / "mlruns").as_uri()


def test_a_server_that_answers_passes_the_check():
    import http.server
    import threading

    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)  # answers 501
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        tracking.check_reachable(f"http://127.0.0.1:{server.server_port}")
        tracking.check_reachable("sqlite:///nowhere/mlflow.db")  # not a server: MLflow's business
    finally:
        server.shutdown()


def watch_distalign_log(caplog, monkeypatch):
    """caplog sees the "distalign" logger even once ``logs.configure`` has stopped it propagating."""
    import logging

    logger = logging.getLogger("distalign")
    monkeypatch.setattr(logger, "handlers", [*logger.handlers, caplog.handler])
    monkeypatch.setattr(logger, "level", logging.INFO)


@pytest.mark.heavy
def test_metrics_logged_while_the_server_is_down_are_sent_when_it_returns(tmp_path, monkeypatch, caplog):
    """A real tracking server (infra/mlflow/serve.sh, basic auth) stops and starts again: logging never waits
    on it, and every value logged meanwhile arrives once it is back."""
    import time

    from conftest import free_port
    from mlflow_server import TrackingServer

    server = TrackingServer(tmp_path, free_port(), str(tmp_path / "artifacts"), password="pw-outage-test")
    server.start()
    try:
        for key, value in {**server.client_env, **tracking.WORKER_HTTP_SETTINGS}.items():
            monkeypatch.setenv(key, value)  # as in a training worker
        client = MlflowClient(server.url)
        run_id = client.create_run(client.create_experiment("outage")).info.run_id
        watch_distalign_log(caplog, monkeypatch)
        logger = MetricLogger(server.url, run_id, retry_every_s=0.5)
        logger.log({"Train/loss": 1.0}, step=1)
        deadline = time.time() + 30
        while not client.get_metric_history(run_id, "Train/loss") and time.time() < deadline:
            time.sleep(0.2)

        server.stop()
        started = time.monotonic()
        for step in range(2, 6):
            logger.log({"Train/loss": float(step)}, step)
        assert time.monotonic() - started < 0.5  # logging never waits on the server
        deadline = time.time() + 30
        while "unreachable" not in caplog.text and time.time() < deadline:
            time.sleep(0.2)
        assert f"tracking server {server.url} unreachable" in caplog.text

        server.start()
        assert logger.close() == 0
        assert "answers again" in caplog.text
        history = client.get_metric_history(run_id, "Train/loss")
        assert sorted((m.step, m.value) for m in history) == [(s, float(s)) for s in range(1, 6)]
    finally:
        server.stop()


def test_values_still_queued_when_the_server_stays_away_are_counted_as_dropped(tmp_path, monkeypatch, caplog):
    from conftest import free_port

    watch_distalign_log(caplog, monkeypatch)

    for key, value in tracking.WORKER_HTTP_SETTINGS.items():
        monkeypatch.setenv(key, value)
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens
    logger = MetricLogger(uri, "0" * 32, retry_every_s=0.2, flush_timeout_s=1.0)
    logger.log({"Train/loss": 1.0, "Train/lr": 0.1}, step=1)
    logger.log({"Train/loss": 0.5}, step=2)
    assert logger.close() == 3
    assert f"tracking server {uri} did not answer: 3 metric values of run {'0' * 32} were dropped" in caplog.text


def test_a_value_the_server_refuses_is_named_and_counted_and_never_blocks_the_later_ones(tmp_path, monkeypatch, caplog):
    """A metric name MLflow never accepts (a plugin objective's, say) used to be retried as if the server were
    down, holding every later value behind it until close dropped them all."""
    watch_distalign_log(caplog, monkeypatch)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    run_id = client.create_run(client.create_experiment("refused")).info.run_id
    logger = MetricLogger(uri, run_id, retry_every_s=0.1, flush_timeout_s=20)
    logger.log({"Train/loss": 1.0, "Train/bad~name_loss": 2.0}, step=1)
    logger.log({"Train/loss": 0.5}, step=2)
    assert logger.close() == 1
    assert [
        (m.step, m.value) for m in sorted(client.get_metric_history(run_id, "Train/loss"), key=lambda m: m.step)
    ] == [(1, 1.0), (2, 0.5)]
    assert "refused 1 metric values" in caplog.text and "Train/bad~name_loss at step 1" in caplog.text
    assert "unreachable" not in caplog.text


def test_a_metric_logger_leaves_mlflow_to_its_sending_thread(uri, client, experiment):
    """Made by a training worker before its first step: importing MLflow and opening its store (seconds) happen on
    the logger's thread, not the worker's (a fresh process, where a finder notes the thread that imports MLflow)."""
    run_id = client.create_run(client.create_experiment(experiment)).info.run_id
    script = (
        "import sys, threading\n"
        "class NoteMlflow:\n"
        "    thread = None\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'mlflow' and NoteMlflow.thread is None:\n"
        "            NoteMlflow.thread = threading.current_thread().name\n"
        "sys.meta_path.insert(0, NoteMlflow())\n"
        "from distalign.tracking import MetricLogger\n"
        f"logger = MetricLogger('{uri}', '{run_id}')\n"
        "logger.log({'Train/loss': 1.0}, 1)\n"
        "print(logger.close(), NoteMlflow.thread)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "distalign-metrics"]  # sent, nothing dropped
    assert [m.value for m in client.get_metric_history(run_id, "Train/loss")] == [1.0]


def test_rank_0_s_metric_logger_and_system_metrics_sampler_start_together_without_an_import_deadlock(
    uri, client, experiment
):
    """Rank 0 starts its metric logger and its node's system-metrics sampler together, each importing MLflow on its
    own thread. Unserialised, the two imports deadlocked on one of MLflow's module locks in every try here (Python
    then fails one: "partially initialized module", and MLflow stays broken), and every metric of the run was dropped
    as if the server were down. A fresh process, the two started at one moment; the loss reaches the store."""
    run_id = client.create_run(client.create_experiment(experiment)).info.run_id
    script = (
        "import threading\n"
        "from distalign.tracking import MetricLogger, SystemMetricsSampler\n"
        "start, errors = threading.Barrier(2), []\n"
        "def monitors():\n"
        "    start.wait()\n"
        "    try:\n"
        "        SystemMetricsSampler._monitors()\n"
        "    except Exception as err:\n"
        "        errors.append(repr(err))\n"
        "sampler = threading.Thread(target=monitors)\n"
        "sampler.start()\n"
        "start.wait()\n"
        f"logger = MetricLogger('{uri}', '{run_id}')\n"
        "logger.log({'Train/loss': 1.0}, 1)\n"
        "sampler.join()\n"
        "print(logger.close(), errors)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0 []", done.stdout + done.stderr[-3000:]
    assert [m.value for m in client.get_metric_history(run_id, "Train/loss")] == [1.0]
