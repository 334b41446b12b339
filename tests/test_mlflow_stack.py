"""The tracking stack of infra/ for real: infra/mlflow/serve.sh (basic auth) on a PostgreSQL database, artifacts
proxied to S3 (moto's server), with a `distalign train` run logging to it. The server is killed and started
again mid-run; afterwards every metric, param and artifact is there, the run is FINISHED, and the selected
checkpoint's model is in the Model Registry, loadable with ``mlflow.transformers.load_model``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import QUICKSTART, SMALL, free_port
from mlflow.tracking import MlflowClient
from mlflow_server import TrackingServer, postgres

from distalign.config import load_config
from distalign.tracking import BEST_CHECKPOINT_TAG, CHECKPOINT_TAG

pytestmark = pytest.mark.heavy
MODEL_NAME = "distalign-stack"
STEPS = 30


@pytest.fixture(scope="module")
def stack(s3_endpoint, tmp_path_factory):
    """PostgreSQL, S3 and the tracking server of infra/ on them; yields (server, S3 endpoint, boto3 client)."""
    s3_url, s3 = s3_endpoint
    s3.create_bucket(Bucket="mlflow")
    directory = tmp_path_factory.mktemp("stack")
    with postgres() as database:
        server = TrackingServer(
            directory, free_port(), "s3://mlflow/artifacts", "pw-stack-test", s3_url, database=database
        )
        server.start(timeout=300)  # its app imports for minutes on a busy machine
        try:
            yield server, s3_url, s3
        finally:
            server.stop(crash=True)  # the stores are thrown away: no graceful stop


def wait_for_console(path: Path, text: str, process: subprocess.Popen, timeout: float) -> bool:
    """Whether the command's console shows ``text`` before it ends or time runs out."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if text in path.read_text():
            return True
        if process.poll() is not None:
            return text in path.read_text()
        time.sleep(0.5)
    return False


@pytest.mark.timeout(900)  # 5-7 min on 2 cores at a load of 15-30 (other jobs), more at 50
def test_a_run_rides_out_a_server_restart_and_registers_its_selected_model(stack, tmp_path, monkeypatch):
    server, s3_url, s3 = stack
    overrides = [
        *SMALL,
        "run.name=stack",
        "train.num_workers=1",
        f"train.max_steps={STEPS}",
        "train.log_every=1",
        "train.checkpoint_every=15",
        "eval.every=15",
        "storage.path=s3://ckpt/stack",
        f"storage.endpoint_url={s3_url}",
        f"tracking.registered_model_name={MODEL_NAME}",
    ]
    env = {**os.environ, **server.client_env, "DISTALIGN_HOME": str(tmp_path / "home")}
    console_path = tmp_path / "train.log"
    log = open(console_path, "w+")
    command = [str(Path(sys.executable).parent / "distalign"), "train", str(QUICKSTART), *overrides]
    train = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    for key, value in server.client_env.items():
        monkeypatch.setenv(key, value)
    client = MlflowClient(server.url)
    try:
        # The server dies as the worker starts its loop and comes back once the worker has met the outage, so its
        # step-0 evaluation and first steps are logged into a dead server however fast the machine (on an idle one
        # the 30 steps take seconds, fewer than a restart)
        assert wait_for_console(console_path, "starting step 0", train, timeout=480), console_path.read_text()[-5000:]
        server.stop(crash=True)  # SIGKILL: no request it was serving gets an answer
        assert wait_for_console(console_path, f"tracking server {server.url} unreachable", train, timeout=240), (
            console_path.read_text()[-5000:]
        )
        server.start(timeout=300)
        assert train.wait(timeout=300) == 0, console_path.read_text()[-5000:]
    finally:
        if train.poll() is None:
            train.kill()
        log.close()
    console = console_path.read_text()
    assert "answers again" in console, console[-5000:]

    (run,) = client.search_runs([client.get_experiment_by_name("distalign").experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "stack"
    history = client.get_metric_history(run.info.run_id, "Train/loss")
    assert sorted(m.step for m in history) == list(range(1, STEPS + 1))
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "eval/bli/avg/mrr")) == [0, 15, 30]
    config = load_config(QUICKSTART, overrides)
    assert set(config.flat()) <= set(run.data.params)
    assert run.data.params["train.max_steps"] == str(STEPS)
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert "config.yaml" in artifacts
    stored = [o["Key"] for o in s3.list_objects_v2(Bucket="mlflow")["Contents"]]
    assert any(key.endswith("/config.yaml") for key in stored)

    # the selected checkpoint's model in the Model Registry, its files in S3, loadable as MLflow's transformers
    selected = run.data.tags.get(BEST_CHECKPOINT_TAG) or run.data.tags[CHECKPOINT_TAG]
    version = client.get_registered_model(MODEL_NAME).latest_versions[0]
    assert int(version.version) == 1 and version.run_id == run.info.run_id
    assert version.tags[CHECKPOINT_TAG] == selected
    assert [f"models:/{m.model_id}" for m in run.outputs.model_outputs] == [version.source]
    assert any(key.endswith("/model.safetensors") for key in stored)
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.url)
    components = mlflow.transformers.load_model(f"models:/{MODEL_NAME}/1", return_type="components")
    assert components["task"] == "fill-mask"
    checkpoint = download(s3, selected, tmp_path / "checkpoint")
    from distalign.models.loading import load_masked_lm, load_tokenizer

    trained, tokenizer = load_masked_lm(str(checkpoint / "model")), load_tokenizer(str(checkpoint / "model"))
    batch = tokenizer(["xa-w001 xb-w002", "a sentence"], return_tensors="pt", padding=True)
    registered = components["model"].eval()
    assert components["tokenizer"](["xa-w001 xb-w002"])["input_ids"] == tokenizer(["xa-w001 xb-w002"])["input_ids"]
    with torch.no_grad():
        torch.testing.assert_close(registered(**batch).logits, trained.eval()(**batch).logits)


def download(s3, uri: str, destination: Path) -> Path:
    bucket, prefix = uri.removeprefix("s3://").split("/", 1)
    for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]:
        if item["Key"].endswith("/"):
            continue
        target = destination / item["Key"].removeprefix(prefix).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, item["Key"], str(target))
    return destination
