"""distalign.tracking against a real sqlite MLflow store."""

import uuid

import pytest
import yaml
from mlflow.tracking import MlflowClient

from distalign.config import load_config
from distalign import tracking
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
        logger.log({"train/loss": 2.5, "train/lr": 1e-3}, step=10)
        logger.log({"train/loss": 1.25}, step=20)
        logger.log({"eval/bli/avg/mrr": 0.5}, step=20)
    history = client.get_metric_history(run_id, "train/loss")
    assert sorted((m.step, m.value) for m in history) == [(10, 2.5), (20, 1.25)]
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "train/lr")] == [(10, 1e-3)]
    latest = client.get_run(run_id).data.metrics
    assert latest == {"train/loss": 1.25, "train/lr": 1e-3, "eval/bli/avg/mrr": 0.5}


def test_sqlite_store_keeps_artifacts_beside_the_database(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not where the database is
    db_dir = tmp_path / "store"
    db_dir.mkdir()
    uri = f"sqlite:///{db_dir}/mlflow.db"
    client = tracking.client_for(uri)
    exp = client.get_experiment(tracking.experiment_id(client, "artifacts-here"))
    assert exp.artifact_location == (db_dir / "mlruns").as_uri()


def test_unreachable_tracking_server_fails_at_once_naming_it(capsys):
    """A stopped server: one error line naming the URI within seconds (MLflow alone retries ~260 s)."""
    import socket
    import time

    from conftest import QUICKSTART
    from distalign.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    started = time.time()
    code = main(["train", str(QUICKSTART), f"tracking.uri=http://127.0.0.1:{port}"])
    assert code == 2 and time.time() - started < 10
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"distalign: error: tracking.uri http://127.0.0.1:{port}: the MLflow tracking server")


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
