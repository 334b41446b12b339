"""cluster/ and infra/: the launcher YAML passes the schema that ships inside `ray` (as `ray up` checks it), the
KubeRay and Kubernetes manifests are well formed and agree with the pins, and a RayJob's entrypoint names a
config and keys that exist. (`ray job submit` with cluster/runtime_env.yaml runs in tests/train/test_job_submit.py.)"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
from pathlib import Path

import jsonschema
import pytest
import ray
import yaml
from conftest import REPO
from ray.autoscaler._private.util import prepare_config, validate_config

from distalign.config import ExperimentConfig, load_dataclass

CLUSTER, INFRA = REPO / "cluster", REPO / "infra"
RAY_IMAGE = f"rayproject/ray:{ray.__version__}-py311-gpu"


def pinned(package: str) -> str:
    """The version pyproject.toml pins a package to."""
    return re.search(rf'"{re.escape(package)}==([^"]+)"', (REPO / "pyproject.toml").read_text()).group(1)


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def launcher() -> dict:
    return yaml.safe_load((CLUSTER / "aws.yaml").read_text())


def test_the_launcher_yaml_passes_rays_schema(launcher):
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    jsonschema.validate(launcher, schema)
    validate_config(prepare_config(copy.deepcopy(launcher)))  # what `ray up` does before it starts anything
    misspelt = {**launcher, "head_node_typ": launcher["head_node_type"]}
    with pytest.raises(jsonschema.ValidationError):  # the schema refuses unknown keys
        jsonschema.validate(misspelt, schema)


def test_the_launcher_has_a_cpu_head_that_trains_nothing_and_autoscaling_gpu_workers(launcher):
    nodes = launcher["available_node_types"]
    head = nodes[launcher["head_node_type"]]
    assert head["resources"]["CPU"] == 0
    assert any("ray start --head --num-cpus=0" in c for c in launcher["head_start_ray_commands"])
    (workers,) = [n for name, n in nodes.items() if name != launcher["head_node_type"]]
    assert workers["resources"]["GPU"] >= 1 and workers["min_workers"] < workers["max_workers"]
    assert launcher["docker"]["image"] == RAY_IMAGE


def test_the_image_builds_on_rays_image_with_the_pinned_torch():
    dockerfile = (CLUSTER / "Dockerfile").read_text()
    assert f"FROM {RAY_IMAGE}" in dockerfile.splitlines()
    assert f"torch=={pinned('torch')}" in dockerfile
    # the editable package's bytecode is in the image, after its sources (pip compiles only what it installs)
    lines = dockerfile.splitlines()
    compiled = next(
        i for i, line in enumerate(lines) if line.startswith("RUN python -m compileall") and "distalign" in line
    )
    assert compiled > max(i for i, line in enumerate(lines) if line.startswith("COPY") and "distalign" in line)


@pytest.fixture(scope="module")
def kuberay() -> dict[str, dict]:
    manifests = documents(CLUSTER / "kuberay" / "raycluster.yaml") + documents(CLUSTER / "kuberay" / "rayjob.yaml")
    return {m["kind"]: m for m in manifests}


def test_the_kuberay_cluster_matches_the_ray_pin_and_has_a_gpu_group(kuberay):
    cluster = kuberay["RayCluster"]
    assert cluster["apiVersion"] == "ray.io/v1" and cluster["spec"]["rayVersion"] == ray.__version__
    assert cluster["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    (group,) = cluster["spec"]["workerGroupSpecs"]
    (worker,) = group["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert group["minReplicas"] < group["maxReplicas"]
    secrets = {ref["secretRef"]["name"] for ref in worker["envFrom"]}
    assert secrets == {yaml.safe_load((INFRA / "k8s" / "secret.example.yaml").read_text())["metadata"]["name"]}


def test_the_rayjob_runs_the_training_entrypoint_on_that_cluster(kuberay):
    job, cluster = kuberay["RayJob"], kuberay["RayCluster"]
    assert job["apiVersion"] == "ray.io/v1"
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}
    python, script, flag, config, *overrides = shlex.split(job["spec"]["entrypoint"])
    assert (python, script, flag) == ("python", "jobs/train.py", "--config")
    assert (REPO / script).is_file()
    # the config exists and every override names a key of it (its data files are the cluster's, not here)
    load_dataclass(ExperimentConfig, REPO / config, overrides)
    runtime_env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    workdir = re.search(r"^WORKDIR (\S+)$", (CLUSTER / "Dockerfile").read_text(), re.M).group(1)
    assert runtime_env["working_dir"] == workdir  # the package inside the image
    standalone = yaml.safe_load((CLUSTER / "runtime_env.yaml").read_text())
    assert set(runtime_env["env_vars"]) == set(standalone["env_vars"])


def test_the_runtime_env_file_is_one_ray_accepts():
    from ray.runtime_env import RuntimeEnv

    runtime_env = yaml.safe_load((CLUSTER / "runtime_env.yaml").read_text())
    RuntimeEnv(**runtime_env)
    assert runtime_env["working_dir"] == "."
    assert {".venv/", "runs/"} <= set(runtime_env["excludes"])
    assert not [k for k in runtime_env["env_vars"] if re.search("SECRET|PASSWORD|KEY", k)]  # secrets stay out


def test_the_infra_services_run_the_pinned_mlflow_with_auth_postgres_and_minio():
    compose = yaml.safe_load((INFRA / "compose.yaml").read_text())
    assert set(compose["services"]) == {"postgres", "minio", "buckets", "mlflow"}
    mlflow = compose["services"]["mlflow"]
    assert mlflow["environment"]["MLFLOW_BACKEND_STORE_URI"].startswith("postgresql://")
    assert mlflow["environment"]["MLFLOW_ARTIFACTS_DESTINATION"].startswith("s3://")
    image = (INFRA / "mlflow" / "Dockerfile").read_text()
    for package in ("mlflow", "psycopg[binary]", "sqlalchemy"):  # as tests/test_mlflow_stack.py runs them
        assert f"{package}=={pinned(package)}" in image, package
    serve = (INFRA / "mlflow" / "serve.sh").read_text()
    assert "--app-name basic-auth" in serve and "--serve-artifacts" in serve
    required = set(re.findall(r'"\$\{(\w+):\?\}"', serve))
    assert required == {
        "MLFLOW_BACKEND_STORE_URI",
        "MLFLOW_ARTIFACTS_DESTINATION",
        "MLFLOW_AUTH_ADMIN_PASSWORD",
        "MLFLOW_FLASK_SERVER_SECRET_KEY",
    }
    assert required <= set(mlflow["environment"])

    manifests = documents(INFRA / "k8s" / "services.yaml")
    kinds = {(m["kind"], m["metadata"]["name"]) for m in manifests}
    assert {
        ("Deployment", "mlflow"),
        ("Service", "mlflow"),
        ("StatefulSet", "postgres"),
        ("StatefulSet", "minio"),
        ("Job", "minio-bucket"),
    } <= kinds
    (deployment,) = [m for m in manifests if m["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    secret = yaml.safe_load((INFRA / "k8s" / "secret.example.yaml").read_text())["stringData"]
    # every variable serve.sh requires comes from the container's env or the secret it loads
    assert required <= {e["name"] for e in container["env"]} | set(secret)
    refs = [
        e["valueFrom"]["secretKeyRef"]["key"]
        for m in manifests
        for c in pod_containers(m)
        for e in c.get("env", [])
        if "valueFrom" in e
    ]
    assert refs and set(refs) <= set(secret)


def pod_containers(manifest: dict) -> list[dict]:
    template = manifest.get("spec", {}).get("template")
    return template["spec"]["containers"] if template else []


def test_cluster_nodes_keep_as_many_warm_workers_as_a_local_cluster(launcher, kuberay):
    """Every way of starting Ray keeps the idle worker processes the trials' tasks reuse (``ensure_ray``)."""
    from distalign.ray_session import WARM_WORKER_SETTINGS

    setting = f"RAY_num_workers_soft_limit={WARM_WORKER_SETTINGS['num_workers_soft_limit']}"
    assert any(setting in c and "ray start" in c for c in launcher["worker_start_ray_commands"])
    (group,) = kuberay["RayCluster"]["spec"]["workerGroupSpecs"]
    (worker,) = group["template"]["spec"]["containers"]
    assert setting in {f"{e['name']}={e['value']}" for e in worker["env"] if "value" in e}


def test_the_kuberay_head_keeps_its_gcs_in_the_infra_redis_with_the_secrets_password(kuberay):
    options = kuberay["RayCluster"]["spec"]["gcsFaultToleranceOptions"]
    host, port = options["redisAddress"].split(":")
    manifests = documents(INFRA / "k8s" / "services.yaml")
    (service,) = [m for m in manifests if m["kind"] == "Service" and m["metadata"]["name"] == host.split(".")[0]]
    assert int(port) in {p["port"] for p in service["spec"]["ports"]}
    assert host.split(".")[1] == "distalign"  # the namespace the guides apply everything in
    (redis,) = [m for m in manifests if m["kind"] == "StatefulSet" and m["metadata"]["name"] == "redis"]
    (container,) = pod_containers(redis)
    assert "--appendonly yes" in " ".join(container["command"])  # a restarted Redis pod still has the tables
    secret = yaml.safe_load((INFRA / "k8s" / "secret.example.yaml").read_text())
    reference = options["redisPassword"]["valueFrom"]["secretKeyRef"]
    assert reference["name"] == secret["metadata"]["name"] and reference["key"] in secret["stringData"]


def test_the_launcher_head_reads_its_redis_from_ssm_and_starts_without_one(launcher, tmp_path):
    """cluster/gcs_redis.py against a real SSM endpoint (moto's server): no parameter, no exports (the GCS stays in
    memory); with one, the exports the head's `ray start` line reads."""
    import subprocess
    import sys

    import boto3
    from conftest import moto_s3_server

    (start,) = [c for c in launcher["head_start_ray_commands"] if "ray start" in c]
    assert 'redis_env="$(python /home/ray/distalign/cluster/gcs_redis.py)" && eval "$redis_env" && ray start' in start
    assert '--redis-password="${GCS_REDIS_PASSWORD:-}"' in start
    (worker_start,) = [c for c in launcher["worker_start_ray_commands"] if "ray start" in c]
    assert "RAY_gcs_rpc_server_reconnect_timeout_s=600" in worker_start  # workers outwait a head's restart
    shell = (
        'redis_env="$(python cluster/gcs_redis.py)" && eval "$redis_env" && '
        'echo "address=${RAY_REDIS_ADDRESS-unset} password=${GCS_REDIS_PASSWORD-unset}"'
    )
    with moto_s3_server("unused") as (url, _):
        env = {
            **os.environ,
            "DISTALIGN_SSM_ENDPOINT": url,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        }
        run = lambda: subprocess.run(["bash", "-c", shell], cwd=REPO, env=env, capture_output=True, text=True)  # noqa: E731
        assert run().stdout.strip() == "address=unset password=unset"
        ssm = boto3.client(
            "ssm",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        ssm.put_parameter(Name="/distalign/gcs-redis", Type="SecureString", Value="redis.internal:6379 s3cr'et")
        assert run().stdout.strip() == "address=redis.internal:6379 password=s3cr'et"
        ssm.put_parameter(Name="/distalign/gcs-redis", Type="SecureString", Value="redis.internal", Overwrite=True)
        refused = run()
        assert refused.returncode != 0 and "/distalign/gcs-redis" in refused.stderr
