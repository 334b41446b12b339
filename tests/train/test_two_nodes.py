"""Two Ray nodes on loopback (two `ray start` processes), storage on a real S3 endpoint (moto): the two
training workers run on different nodes and read the staged inputs from S3 (the driver's staging directory is
gone once staging ends). The second node is stopped mid-epoch: the run goes on by itself on the worker the head
can hold (``train.min_workers=1``), the corpus epoch dealt again. Then the driver is killed, and the command run
again on the node that is left resumes the run (its MLflow run and step count) from the checkpoint on S3. No
corpus row is trained twice.

The resumed run asks for a fixed worker count: an elastic run started within ~3 minutes of a driver's death
waits for Ray Train's resource requests of the dead run to expire (docs/guides/operations.md, "Failures and
recovery")."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import QUICKSTART, SMALL, free_port
from mlflow.tracking import MlflowClient
from test_job_submit import BIN, forget_cluster_address, stop_by_pid
from test_recovery import trained_rows

from distalign.tools.bench.loopback import start_node, wait_for_nodes

pytestmark = pytest.mark.slow


def wait_for_line(log: Path, pattern: str, process: subprocess.Popen, timeout: float = 300, since: int = 0) -> re.Match:
    """The first match of ``pattern`` in the log from character ``since`` on, once the process writes it."""
    deadline = time.time() + timeout
    while process.poll() is None and time.time() < deadline:
        if found := re.compile(pattern).search(log.read_text(), since):
            return found
        time.sleep(0.3)
    raise AssertionError(f"no {pattern!r} in the log:\n{log.read_text()[-5000:]}")


def test_two_nodes_train_from_staged_inputs_on_s3_go_on_after_a_node_is_lost_and_resume_after_the_driver_died(
    s3_endpoint, tmp_path
):
    url, s3 = s3_endpoint
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env['PATH']}",
        RAY_AUTH_MODE="token",
        DISTALIGN_HOME=str(tmp_path),
        DISTALIGN_CACHE=str(tmp_path / "node-cache"),
        # once the node is gone, Ray Train first tries the old size (its view of the cluster lags) and
        # waits this long for it (default 60 s) before trying the size that fits
        RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S="15",
    )
    gcs_port = free_port()
    address = f"127.0.0.1:{gcs_port}"
    head = start_node(["--head", f"--port={gcs_port}", "--include-dashboard=false"], 1, env, tmp_path / "head.log")
    node = None
    try:
        wait_for_nodes(address, 1, timeout=120, env=env)
        node = start_node([f"--address={address}"], 1, env, tmp_path / "node.log")
        wait_for_nodes(address, 2, timeout=120, env=env)
        staging = tmp_path / "staging"
        trace = tmp_path / "rows"
        # one worker per 1-CPU node (0.6 CPU), beside the corpus reservations of both (0.2 each): the head holds
        # one worker once the other node is gone
        command = [
            sys.executable,
            "-m",
            "distalign.cli",
            "train",
            str(QUICKSTART),
            *SMALL,
            "train.max_steps=16",
            "eval.every=0",
            "run.name=two-nodes",
            "storage.path=s3://ckpt/multi",
            f"storage.endpoint_url={url}",
            f"data.output_dir={staging}",
            "train.placement_strategy=STRICT_SPREAD",
            "train.cpus_per_worker=0.6",
            "data.corpus_cpus_per_worker=0.2",
            "objectives.lexical.weight=0",
            f"train.trace_rows={trace}",
        ]
        first_log = tmp_path / "first.log"
        first = subprocess.Popen(
            [*command, "train.min_workers=1"],
            env={**env, "RAY_ADDRESS": address},
            stdout=open(first_log, "w"),
            stderr=subprocess.STDOUT,
        )
        # once Ray Train has registered a checkpoint on S3 (step 3), the second node is stopped (its raylet and
        # workers)
        snapshot = "multi/two-nodes/checkpoint_manager_snapshot.json"
        deadline = time.time() + 400
        while first.poll() is None and time.time() < deadline:
            if s3.list_objects_v2(Bucket="ckpt", Prefix=snapshot).get("KeyCount"):
                break
            time.sleep(0.3)
        log = first_log.read_text()
        assert first.poll() is None, f"the run ended before its node could be stopped:\n{log[-5000:]}"
        assert len(set(re.findall(r"worker \d of 2 on node ([0-9a-f]+)", log))) == 2, log[-5000:]  # one per node
        stop_by_pid(node)
        node = None
        resumed = wait_for_line(first_log, r"resuming at step (\d+)/16 on 1 workers", first)
        # The driver dies (SIGKILL) once the worker left has trained past its next checkpoint (Ray Train registers
        # one a poll or two after it is written); its job goes with it.
        resumed_at = int(resumed.group(1))
        past = min(resumed_at + 7, 14)
        wait_for_line(first_log, rf"step ({past}|{past + 1})/16 loss", first, since=resumed.end())
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert not staging.exists()  # the workers never needed the driver's disk
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket="ckpt", Prefix="multi/two-nodes/")["Contents"]]
        assert "multi/two-nodes/inputs/model/_STAGED" in keys
        assert any(k.startswith("multi/two-nodes/inputs/corpus/") for k in keys)

        # the same command again, for the one node left
        again_log = tmp_path / "again.log"
        again = subprocess.run(
            [*command, "train.num_workers=1"],
            env={**env, "RAY_ADDRESS": address},
            stdout=open(again_log, "w"),
            stderr=subprocess.STDOUT,
            timeout=400,
        )
        log = again_log.read_text()
        assert again.returncode == 0, log[-5000:]
        again_at = int(re.search(r"resuming at step (\d+)/16 on 1 workers", log).group(1))
        assert again_at % 3 == 0 and again_at >= resumed_at, log[-5000:]
        assert "finished at step 16" in log
    finally:
        for process in (node, head):
            if process is not None:
                stop_by_pid(process)
        forget_cluster_address(gcs_port)

    # the same MLflow run, reopened and finished, its step count continued
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([client.get_experiment_by_name("distalign").experiment_id])
    assert run.info.run_name == "two-nodes" and run.info.status == "FINISHED"
    logged = sorted(m.step for m in client.get_metric_history(run.info.run_id, "Train/loss"))
    assert set(logged) == set(range(2, 17, 2)) and logged.count(2) == 1  # no resume started again from step 0
    traced = trained_rows(trace, "corpus")
    assert {workers for workers, _, _ in traced} == {2, 1}
    rows = [(epoch, row) for _, epoch, row in traced]
    assert len(rows) == len(set(rows))  # no corpus row trained twice in an epoch
