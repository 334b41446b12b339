"""Shared fixtures: a real local Ray cluster, small-config overrides, an isolated DISTALIGN_HOME."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "jobs" / "configs" / "quickstart.yaml"
SHARED_DATA = REPO.parent / "shared" / "data"

S3_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}

# The quickstart world and loop shrunk so a 2-worker run takes seconds.
SMALL = [
    "data.synthetic.num_concepts=80",
    "data.synthetic.sentences_per_language=300",
    "train.max_steps=6",
    "train.checkpoint_every=3",
    "train.log_every=2",
    "train.warmup_steps=2",
    "train.batch_sizes.constraints=16",
    "train.batch_sizes.corpus=8",
    "eval.every=3",
    "eval.bli_max_pairs=40",
]
# sense-aware's warm-up, refits and pruning brought inside those few steps
SENSE_AWARE_SMALL = [
    "objectives.sense_aware.warmup_steps=2",
    "objectives.sense_aware.refit_every=2",
    "objectives.sense_aware.queue_size=64",
    "objectives.sense_aware.proj_dim=4",
    "objectives.sense_aware.prune_beta=0.2",
    "objectives.sense_aware.prune_min_count=1",
]


def free_port() -> int:
    """A loopback port nothing listens on (once this returns)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def ray_local():
    """One real local Ray cluster (2 CPUs) for every test that trains."""
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=True)
    yield ray
    ray.shutdown()


@pytest.fixture
def gloo_group():
    """A gloo process group of one, for the training recipe without Ray."""
    import torch.distributed as dist

    forget_deepspeed_groups()  # an earlier test's, in this process, would stand for this new group
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    forget_deepspeed_groups()


def forget_deepspeed_groups() -> None:
    """DeepSpeed keeps the groups it made (its world clone) until ``deepspeed.comm.destroy_process_group``; a group
    torch destroyed (a bench's, a test's) then breaks the next ``deepspeed.initialize`` in the process ("Group ... is
    not registered")."""
    groups = sys.modules.get("deepspeed.utils.groups")
    if groups is not None:
        groups._release_process_group_references()


@pytest.fixture(scope="module")
def distalign_home(tmp_path_factory):
    """DISTALIGN_HOME (runs/, mlflow.db) in a fresh directory for the whole test module."""
    home = tmp_path_factory.mktemp("home")
    saved = {k: os.environ.get(k) for k in ("DISTALIGN_HOME", "MLFLOW_TRACKING_URI")}
    os.environ["DISTALIGN_HOME"] = str(home)
    os.environ.pop("MLFLOW_TRACKING_URI", None)
    yield home
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@contextlib.contextmanager
def moto_s3_server(bucket: str):
    """moto's S3 server as a process on a loopback port, with ``bucket`` created (as S3_CREDENTIALS's user: moto
    takes any credentials until told otherwise); yields (url, boto3 client with those credentials)."""
    import subprocess
    import sys
    import time

    import boto3

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    s3 = boto3.client(
        "s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    try:
        for _ in range(150):
            try:
                s3.create_bucket(Bucket=bucket)
                break
            except Exception:  # the server is still starting
                time.sleep(0.2)
        yield url, s3
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture(scope="module")
def s3_endpoint():
    """A real S3 endpoint on loopback (moto's server) with a bucket ``ckpt``; yields (url, boto3 client)."""
    saved = {k: os.environ.get(k) for k in S3_CREDENTIALS}
    os.environ.update(S3_CREDENTIALS)
    with moto_s3_server("ckpt") as served:
        yield served
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def staged_by_ray_tasks(driver_cache: Path) -> bool:
    """Whether the Ray cluster's tasks staged their own copy of the one model the driver staged into
    ``driver_cache`` (its DISTALIGN_CACHE, set apart from the cluster's): what a node other than the driver's needs,
    where the driver's copy is not on its disk. The copies are named by the same key (the URI and its listing)."""
    import ray

    from distalign.storage import node_cache_dir

    (driver_copy,) = driver_cache.glob("*/config.json")
    task_cache = ray.get(ray.remote(node_cache_dir).remote())
    assert task_cache != driver_cache, "the test needs the driver's node cache apart from the Ray tasks'"
    return (task_cache / driver_copy.parent.name / "config.json").is_file()


@dataclass(frozen=True)
class GuardedS3:
    """An S3 endpoint that checks every request's signature and the signer's IAM policy."""

    url: str
    keys: dict[str, tuple[str, str]]  # user -> (access key id, secret): see ``guarded_s3``
    unknown_key: str = "AKIAUNKNOWN000000000"  # an access key id the endpoint never issued


@pytest.fixture(scope="module")
def guarded_s3():
    """moto's S3 server enforcing IAM (signatures checked, policies applied): buckets ``guarded`` and ``sealed``,
    each holding a corpus (``corpus/en.txt``), and the access keys of three IAM users: ``writer`` may do anything in
    ``guarded``, ``reader`` only read and list it, ``stranger`` nothing; none of them may touch ``sealed``.
    Nothing here sets the environment's credentials."""
    import boto3
    import requests

    policies = {"writer": ["s3:*"], "reader": ["s3:Get*", "s3:List*", "s3:HeadBucket"], "stranger": []}
    with moto_s3_server("guarded") as (url, s3):
        s3.create_bucket(Bucket="sealed")
        for bucket in ("guarded", "sealed"):
            s3.put_object(Bucket=bucket, Key="corpus/en.txt", Body=b"anna sees rome\npeter likes paris\n" * 10)
        iam = boto3.client(
            "iam",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        keys = {}
        for user, actions in policies.items():
            iam.create_user(UserName=user)
            if actions:
                statement = {
                    "Effect": "Allow",
                    "Action": actions,
                    "Resource": ["arn:aws:s3:::guarded", "arn:aws:s3:::guarded/*"],
                }
                iam.put_user_policy(
                    UserName=user,
                    PolicyName="s3",
                    PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [statement]}),
                )
            key = iam.create_access_key(UserName=user)["AccessKey"]
            keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
        # from here on every request is authenticated (moto's INITIAL_NO_AUTH_ACTION_COUNT, reset to 0)
        requests.post(f"{url}/moto-api/reset-auth", data="0", timeout=10).raise_for_status()
        yield GuardedS3(url, keys)


def pytest_collection_modifyitems(config, items):
    """Mark ``ray`` every test that needs a Ray cluster: it uses ``ray_local``, or it is ``slow``
    (a real Ray cluster or Ray job), so ``make test-fast`` (``-m "not ray and not heavy"``) leaves it out.
    Skip the tests marked ``gpu`` where torch sees no CUDA device (``make gpu-check`` runs them on one), and those
    marked ``wheelhouse`` unless ``-m`` names them (``make test-wheelhouse``: downloads, minutes)."""
    for item in items:
        if "ray_local" in item.fixturenames or item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.ray)
    skips = {}
    if any(item.get_closest_marker("gpu") for item in items) and not cuda_available():
        skips["gpu"] = pytest.mark.skip(reason="marked gpu: no CUDA device here")
    if "wheelhouse" not in (config.getoption("markexpr") or ""):
        skips["wheelhouse"] = pytest.mark.skip(reason="marked wheelhouse: run with -m wheelhouse")
    for item in items:
        for marker, skip in skips.items():
            if item.get_closest_marker(marker):
                item.add_marker(skip)


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture(autouse=True, scope="session")
def benchmark_data_home(tmp_path_factory):
    """DISTALIGN_DATA: the project's ../shared/data where it is beside the checkout (its layout is the data home's),
    else an empty folder; never the user's own cache."""
    saved = os.environ.get("DISTALIGN_DATA")
    home = SHARED_DATA if SHARED_DATA.is_dir() else tmp_path_factory.mktemp("benchmark-data")
    os.environ["DISTALIGN_DATA"] = str(home)
    yield home
    if saved is None:
        os.environ.pop("DISTALIGN_DATA", None)
    else:
        os.environ["DISTALIGN_DATA"] = saved
