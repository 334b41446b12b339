"""A cluster on this machine for benchmarks: several ``ray start`` nodes on loopback and an S3 endpoint (moto's
server), each a process group of its own, stopped on the way out."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_group(process: subprocess.Popen) -> None:
    """SIGTERM the process group (a node's raylet, GCS, workers), SIGKILL what is left."""
    for sig, grace in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """moto's S3 server on a free loopback port (test credentials in this process's environment); yields its URL."""
    import boto3

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(key, "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        s3 = boto3.client("s3", endpoint_url=url)
        deadline = time.time() + 60
        while True:
            try:
                s3.list_buckets()
                break
            except Exception:  # still starting
                if time.time() > deadline:
                    raise
                time.sleep(0.3)
        yield url
    finally:
        stop_group(server)


@contextlib.contextmanager
def ray_nodes(count: int, cpus: int, log_dir: Path) -> Iterator[str]:
    """A head and ``count - 1`` worker nodes of ``cpus`` CPUs each on 127.0.0.1; yields the GCS address."""
    os.environ.setdefault(
        "RAY_AUTH_MODE", "token"
    )  # Ray 2.60 heads from `ray start` require the token (docs/guides/clusters.md)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    log_dir.mkdir(parents=True, exist_ok=True)
    gcs_port = free_port()
    address = f"127.0.0.1:{gcs_port}"
    nodes: list[subprocess.Popen] = []

    try:
        nodes.append(
            start_node(["--head", f"--port={gcs_port}", "--include-dashboard=false"], cpus, env, log_dir / "head.log")
        )
        wait_for_nodes(address, 1)
        for i in range(1, count):  # one at a time: raylets starting together overloaded a 2-core machine's GCS
            nodes.append(start_node([f"--address={address}"], cpus, env, log_dir / f"node{i}.log"))
            wait_for_nodes(address, i + 1)
        yield address
    finally:
        for node in reversed(nodes):
            stop_group(node)
        record = Path("/tmp/ray/ray_current_cluster")  # `ray start` records its address for later ray.init()s
        if record.is_file() and record.read_text().strip().endswith(f":{gcs_port}"):
            record.unlink()


def start_node(args: list[str], cpus: int, env: dict, log: Path) -> subprocess.Popen:
    """``ray start`` on 127.0.0.1 with ``cpus`` CPUs, every port free (several nodes on one machine), its own
    process group (``stop_group``)."""
    ports = [
        f"--{p}-port={free_port()}"
        for p in (
            "node-manager",
            "object-manager",
            "dashboard-agent-listen",
            "dashboard-agent-grpc",
            "metrics-export",
            "runtime-env-agent",
        )
    ]
    return subprocess.Popen(
        [
            str(BIN / "ray"),
            "start",
            "--block",
            f"--num-cpus={cpus}",
            "--node-ip-address=127.0.0.1",
            "--disable-usage-stats",
            *ports,
            *args,
        ],
        env=env,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for_nodes(address: str, count: int, timeout: float = 180, env: dict | None = None) -> None:
    """Until ``count`` nodes are alive in the cluster at ``address`` (probed from a fresh process with ``env``;
    default: this one's, without ``RAY_ADDRESS``)."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    probe = f"import ray; ray.init(address='{address}'); print(len([n for n in ray.nodes() if n['Alive']]))"
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
        if out.returncode == 0 and out.stdout.strip().splitlines()[-1:] == [str(count)]:
            return
        time.sleep(2)
    raise TimeoutError(f"{count} Ray nodes did not join {address} in {timeout:.0f} s")
