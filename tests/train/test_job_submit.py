"""`ray job submit` as an operator runs it (docs/guides/clusters.md, "A team's cluster"): a head from `ray start`, the
job's runtime environment from cluster/runtime_env.yaml, the tracking server of infra/ (basic auth, artifacts proxied to
S3) and checkpoints on S3 (moto's server). The tracking server stops and starts again mid-run; AWS credentials and the
MLflow password sit in the cluster's environment and must show up nowhere the run writes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SMALL, free_port
from mlflow.tracking import MlflowClient
from mlflow_server import TrackingServer

from distalign.tools.bench.loopback import stop_group as stop_by_pid  # SIGTERM a node's process group, then SIGKILL

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def wait_for_dashboard(url: str, head: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if head.poll() is not None:
            raise RuntimeError(f"ray start exited with {head.returncode}")
        try:
            urllib.request.urlopen(f"{url}/api/version", timeout=2)
            return
        except urllib.error.HTTPError:
            return  # answering (an auth error still means it is up)
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"dashboard at {url} did not come up in {timeout}s")


def forget_cluster_address(gcs_port: int) -> None:
    """`ray start` records its address for later `ray.init()` calls; drop it once our head is gone."""
    record = Path("/tmp/ray/ray_current_cluster")
    if record.is_file() and record.read_text().strip().endswith(f":{gcs_port}"):
        record.unlink()


def start_head(env: dict, directory: Path) -> tuple[subprocess.Popen, str, int]:
    """A Ray head with its dashboard (the job server) on free ports; returns it, the dashboard URL, the GCS port."""
    dashboard, gcs_port = free_port(), free_port()
    head = subprocess.Popen(
        [
            str(BIN / "ray"),
            "start",
            "--head",
            "--block",
            "--num-cpus=2",
            f"--port={gcs_port}",
            f"--dashboard-port={dashboard}",
            "--dashboard-host=127.0.0.1",
            "--include-dashboard=true",
            "--disable-usage-stats",
            # Own agent ports: the suite's local cluster already holds the defaults, and an agent that
            # cannot bind never registers ("No available agent to submit job").
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
        ],
        env=env,
        cwd=directory,
        stdout=open(directory / "head.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{dashboard}"
    wait_for_dashboard(url, head)
    return head, url, gcs_port


def submit_when_the_agent_is_ready(command: list[str], env: dict) -> tuple[subprocess.Popen, list[str]]:
    """`ray job submit`, its output collected line by line as it streams; the dashboard answers before its
    job agent is ready on a busy machine, so a submission the agent refused is made again."""
    for _ in range(20):
        submit = subprocess.Popen(
            command, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        output: list[str] = []

        def collect(process=submit, lines=output):
            for line in process.stdout:
                lines.append(line)

        threading.Thread(target=collect, daemon=True).start()
        while submit.poll() is None and not any("submitted successfully" in line for line in output):
            time.sleep(0.5)
        if not any("No available agent to submit job" in line for line in output):
            return submit, output
        submit.wait()
        time.sleep(3)
    raise RuntimeError("the job agent never became ready")


def test_job_submit_with_the_cluster_runtime_env_against_the_infra_tracking_server(s3_endpoint, tmp_path, monkeypatch):
    s3_url, s3 = s3_endpoint
    s3.create_bucket(Bucket="mlflow")
    secrets = {
        "AWS_ACCESS_KEY_ID": "AKIA" + uuid.uuid4().hex[:16].upper(),
        "AWS_SECRET_ACCESS_KEY": "secret-" + uuid.uuid4().hex,
    }
    password = "pw-" + uuid.uuid4().hex
    (tmp_path / "mlflow").mkdir()
    server = TrackingServer(tmp_path / "mlflow", free_port(), "s3://mlflow/artifacts", password, s3_url, secrets)
    server.start()

    # The cluster's own environment holds the credentials (instance role, Kubernetes secret), not the job's.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "MLFLOW_"))}
    env.update(
        secrets,
        PATH=f"{BIN}{os.pathsep}{env['PATH']}",  # the job's `python` is this environment's
        RAY_AUTH_MODE="token",  # Ray 2.60 heads from `ray start` require the token
        MLFLOW_TRACKING_USERNAME="admin",
        MLFLOW_TRACKING_PASSWORD=password,
    )
    runtime_env = yaml.safe_load((REPO / "cluster" / "runtime_env.yaml").read_text())
    services = {
        "MLFLOW_TRACKING_URI": server.url,
        "DISTALIGN_STORAGE": "s3://ckpt/ops",
        "DISTALIGN_STORAGE_ENDPOINT": s3_url,
    }
    assert set(services) <= set(runtime_env["env_vars"])  # the file names every service a run needs
    runtime_env["env_vars"].update(services, DISTALIGN_HOME=str(tmp_path / "home"))
    (tmp_path / "runtime_env.yaml").write_text(yaml.safe_dump(runtime_env))

    head = None
    try:
        head, dashboard, gcs_port = start_head(env, tmp_path)
        command = [
            str(BIN / "ray"),
            "job",
            "submit",
            "--address",
            dashboard,
            "--runtime-env",
            str(tmp_path / "runtime_env.yaml"),
            "--",
            "python",
            "jobs/train.py",
            "--config",
            "jobs/configs/quickstart.yaml",
            *SMALL,
            "run.name=ops",
            "train.max_steps=40",
            "train.log_every=1",
            "train.checkpoint_every=20",
            "eval.every=20",
            "tracking.system_metrics_every_s=1",
        ]
        submit, output = submit_when_the_agent_is_ready(command, env)

        # The tracking server goes away once the run has logged a few steps, and comes back.
        for key, value in server.client_env.items():
            monkeypatch.setenv(key, value)
        client = MlflowClient(server.url)
        deadline = time.time() + 400
        run = None
        while submit.poll() is None and time.time() < deadline:
            experiment = client.get_experiment_by_name("distalign")
            runs = client.search_runs([experiment.experiment_id]) if experiment else []
            if runs and len(client.get_metric_history(runs[0].info.run_id, "Train/loss")) >= 3:
                run = runs[0]
                break
            time.sleep(0.5)
        assert run is not None, "".join(output)[-5000:]
        server.stop()
        time.sleep(5)
        server.start()
        submit.wait(timeout=600)
        time.sleep(1)  # the last lines
        log = "".join(output)
        assert submit.returncode == 0 and "succeeded" in log, log[-5000:]
    finally:
        if head is not None:
            stop_by_pid(head)
            forget_cluster_address(gcs_port)
    try:
        # training went on while the server was away; every value logged meanwhile arrived
        assert f"tracking server {server.url} unreachable" in log and "answers again" in log, log[-5000:]
        run = client.get_run(run.info.run_id)
        assert run.info.status == "FINISHED" and run.info.run_name == "ops"
        assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "Train/loss")) == list(range(1, 41))
        assert "system/node0/cpu_utilization_percentage" in run.data.metrics
        assert "system/node0/system_memory_usage_megabytes" in run.data.metrics
        assert run.data.tags["distalign.checkpoint"].startswith("s3://ckpt/ops/ops/checkpoint_")
        # artifacts come back through the server, and live in its S3 bucket
        artifacts = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / "artifacts")))
        assert (artifacts / "config.yaml").is_file()
        assert any(o["Key"].endswith("/config.yaml") for o in s3.list_objects_v2(Bucket="mlflow")["Contents"])
        with pytest.raises(urllib.error.HTTPError) as refused:  # basic auth is on
            urllib.request.urlopen(f"{server.url}/api/2.0/mlflow/experiments/search?max_results=1", timeout=10)
        assert refused.value.code == 401

        # no secret in the console, MLflow params, tags, artifacts or checkpoints
        places = {
            "console": log,
            **{f"param {k}": v for k, v in run.data.params.items()},
            **{f"tag {k}": v for k, v in run.data.tags.items()},
        }
        places.update({f"artifact {p}": p.read_bytes().decode("latin-1") for p in artifacts.rglob("*") if p.is_file()})
        for item in s3.list_objects_v2(Bucket="ckpt", Prefix="ops/")["Contents"]:
            body = s3.get_object(Bucket="ckpt", Key=item["Key"])["Body"].read()
            places[f"s3://ckpt/{item['Key']}"] = body.decode("latin-1")
        assert len([p for p in places if p.startswith("s3://ckpt/ops/ops/checkpoint_")]) > 5
        for secret in [*secrets.values(), password]:
            assert not [place for place, text in places.items() if secret in text], secret
    finally:
        server.stop()
