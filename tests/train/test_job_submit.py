"""`ray job submit` of the quickstart entrypoint against a head this test starts and stops by PID."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from conftest import REPO, SMALL

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def stop_by_pid(head: subprocess.Popen) -> None:
    """SIGTERM the head's process group (gcs, raylet, dashboard), SIGKILL whatever is left."""
    for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            return
        try:
            head.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def forget_cluster_address(gcs_port: int) -> None:
    """`ray start` records its address for later `ray.init()` calls; drop it once our head is gone."""
    record = Path("/tmp/ray/ray_current_cluster")
    if record.is_file() and record.read_text().strip().endswith(f":{gcs_port}"):
        record.unlink()


def test_ray_job_submit_runs_the_training_entrypoint(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"  # the job's `python` is this environment's
    env["RAY_AUTH_MODE"] = "token"  # Ray 2.60 heads from `ray start` require the token
    dashboard, gcs_port = free_port(), free_port()
    url = f"http://127.0.0.1:{dashboard}"
    head = subprocess.Popen(
        [str(BIN / "ray"), "start", "--head", "--block", "--num-cpus=2", f"--port={gcs_port}",
         f"--dashboard-port={dashboard}", "--dashboard-host=127.0.0.1", "--include-dashboard=true",
         "--disable-usage-stats",
         # Own agent ports: the suite's local cluster already holds the defaults, and an agent that
         # cannot bind never registers ("No available agent to submit job").
         f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
         f"--metrics-export-port={free_port()}", f"--runtime-env-agent-port={free_port()}"],
        env=env, cwd=tmp_path, stdout=open(tmp_path / "head.log", "w"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for_dashboard(url, head)
        runtime_env = '{"env_vars": {"DISTALIGN_HOME": "%s"}}' % tmp_path
        command = [str(BIN / "ray"), "job", "submit", "--address", url, "--working-dir", str(REPO),
                   "--runtime-env-json", runtime_env, "--",
                   "python", "jobs/train.py", "--config", "jobs/configs/quickstart.yaml", *SMALL, "run.name=job"]
        for _ in range(20):  # the dashboard answers before its job agent is ready on a busy machine
            submit = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
            log = submit.stdout + submit.stderr
            if "No available agent to submit job" not in log:
                break
            time.sleep(3)
        assert submit.returncode == 0, log[-4000:]
        assert "succeeded" in log and "[distalign] done" in log, log[-4000:]
    finally:
        stop_by_pid(head)
        forget_cluster_address(gcs_port)
    assert head.poll() is not None

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("distalign").experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "job"
    assert run.data.metrics["train/loss"] > 0
    assert Path(run.data.tags["distalign.checkpoint"]).is_relative_to(tmp_path / "runs" / "job")
